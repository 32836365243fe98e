#include "gateway/engine_api_error.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "upstream/engine_errors.h"

namespace kvgate::gateway {

using nlohmann::json;

ApiError engine_api_error(int status, std::string_view body) {
  if (const EngineErrorInfo info = classify_engine_error(status, body);
      info.kind == EngineErrorKind::kUnsupportedInput) {
    // The engine answers 500, but it is the request the model cannot take: the client's to fix.
    ApiError e = bad_request("the model cannot take this input (" + info.message + ")", std::nullopt,
                             "unsupported_input");
    return e;
  }
  ApiError e;
  e.status = status >= 400 ? status : 502;
  e.type = status >= 500 ? "server_error" : "invalid_request_error";
  auto j = json::parse(body, nullptr, false);
  if (!j.is_discarded() && j.is_object() && j.contains("error")) {
    const json& err = j["error"];
    if (err.is_object()) {
      const auto message = err.find("message");
      e.message = message != err.end() && message->is_string() ? message->get<std::string>()
                                                               : std::string("the engine reported an error");
      if (err.contains("type") && err["type"].is_string()) e.type = err["type"].get<std::string>();
      for (auto& [k, v] : err.items()) {
        if (k != "message" && k != "type" && k != "code" && k != "param") e.extra[k] = v;
      }
      if (err.contains("code") && err["code"].is_string()) e.code = err["code"].get<std::string>();
      return e;
    }
    if (err.is_string()) {
      e.message = err.get<std::string>();
      return e;
    }
  }
  const std::string_view text = body.substr(0, 500);
  e.message = fmt::format("the engine answered HTTP {}{}{}", status, text.empty() ? "" : ": ", text);
  e.code = "upstream_error";
  return e;
}

}  // namespace kvgate::gateway
