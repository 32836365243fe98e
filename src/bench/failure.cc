#include "bench/failure.h"
#include "util/json.h"

namespace kvgate::bench {

using nlohmann::json;

const char* failure_name(FailureKind kind) {
  switch (kind) {
    case FailureKind::kNone:
      return "ok";
    case FailureKind::kContextOverflow:
      return "context_overflow";
    case FailureKind::kOutputParse:
      return "output_parse";
    case FailureKind::kEngineError:
      return "engine_error";
    case FailureKind::kTransport:
      return "transport";
  }
  return "unknown";
}

Failure classify_failure(int status, const std::string& transport_error, const json& error) {
  if (status == 0 || !transport_error.empty()) {
    return {FailureKind::kTransport, transport_error.empty() ? "no answer" : transport_error};
  }
  json e = error;
  if (e.is_object() && e.contains("error")) e = e["error"];
  std::string message, type, code;
  if (e.is_object()) {
    if (e.contains("message") && e["message"].is_string()) message = e["message"];
    if (e.contains("type") && e["type"].is_string()) type = e["type"];
    if (e.contains("code") && e["code"].is_string()) code = e["code"];
  } else if (e.is_string()) {
    message = e.get<std::string>();
  }
  const bool has_error = !e.is_null() && !(e.is_object() && e.empty());
  if (status < 400 && !has_error) return {};
  if (message.empty()) message = has_error ? util::json_text(e) : "HTTP " + std::to_string(status);
  if (type == "exceed_context_size_error" || code == "context_length_exceeded" ||
      message.find("exceeds the available context size") != std::string::npos ||
      message.find("larger than the max context size") != std::string::npos) {
    return {FailureKind::kContextOverflow, message};
  }
  if (code == "output_parse_error" || message.find("does not match the expected") != std::string::npos) {
    return {FailureKind::kOutputParse, message};
  }
  return {FailureKind::kEngineError, message};
}

}  // namespace kvgate::bench
