#include "upstream/engine_errors.h"

#include <nlohmann/json.hpp>

#include "util/strings.h"

namespace kvgate::gateway {
namespace {

using nlohmann::json;

bool has(std::string_view s, std::string_view needle) { return s.find(needle) != std::string_view::npos; }

uint64_t count(const json& e, const char* key) {
  auto it = e.find(key);
  return it != e.end() && it->is_number_unsigned() ? it->get<uint64_t>() : 0;
}

// vLLM's and SGLang's words for a prompt longer than the model's context, with their figures.
bool read_openai_server_overflow(std::string_view m, EngineErrorInfo& info) {
  if (has(m, "maximum context length is")) {  // vLLM
    info.n_ctx = util::number_after(m, "maximum context length is ");
    for (std::string_view before_prompt : {"(", "prompt contains at least ", "request has "}) {
      const uint64_t n = util::number_after(m, before_prompt);
      if (n > 0 && (has(m, std::string(before_prompt) + std::to_string(n) + " in the messages") ||
                    has(m, std::to_string(n) + " input tokens"))) {
        info.prompt_tokens = n;
        break;
      }
    }
    return true;
  }
  if (has(m, "is longer than the model's context length")) {  // SGLang
    info.prompt_tokens = util::number_after(m, "The input (");
    info.n_ctx = util::number_after(m, "model's context length (");
    return true;
  }
  return false;
}

}  // namespace

bool is_output_error_message(std::string_view m) {
  return has(m, "does not match the expected") || has(m, "Failed to parse input at pos") ||
         has(m, "[json.exception.type_error.316]") || has(m, "invalid UTF-8 byte");
}

EngineErrorInfo classify_engine_error(int status, std::string_view body) {
  EngineErrorInfo info;
  auto j = json::parse(body, nullptr, false);
  std::string type;
  const json* e = nullptr;
  if (j.is_object() && j.contains("error")) {
    if (j["error"].is_object()) {
      e = &j["error"];
      if (auto m = e->find("message"); m != e->end() && m->is_string()) info.message = m->get<std::string>();
      if (auto t = e->find("type"); t != e->end() && t->is_string()) type = t->get<std::string>();
    } else if (j["error"].is_string()) {
      info.message = j["error"].get<std::string>();
    }
  } else if (j.is_object() && j.contains("message") && j["message"].is_string()) {
    info.message = j["message"].get<std::string>();  // vLLM before 0.10: the error object is the body
  } else {
    info.message = std::string(body.substr(0, 500));
  }
  const std::string& m = info.message;
  if (status < 400) return info;
  if (has(m, "context shift is disabled")) {
    info.kind = EngineErrorKind::kContextFilled;
  } else if (type == "exceed_context_size_error" || type == "context_length_exceeded" ||
             has(m, "exceeds the available context size") || has(m, "context_length_exceeded")) {
    info.kind = EngineErrorKind::kPromptTooLong;
    if (e != nullptr) {
      info.prompt_tokens = count(*e, "n_prompt_tokens");
      info.n_ctx = count(*e, "n_ctx");
    }
  } else if (read_openai_server_overflow(m, info)) {
    info.kind = EngineErrorKind::kPromptTooLong;
  } else if (has(m, "While executing") || has(m, "Jinja Exception")) {
    info.kind = EngineErrorKind::kTemplate;
  } else if (status >= 500 && is_output_error_message(m)) {
    info.kind = EngineErrorKind::kOutput;
  } else if (has(m, "input is not supported")) {
    info.kind = EngineErrorKind::kUnsupportedInput;  // an image or audio the model cannot take
  }
  return info;
}

}  // namespace kvgate::gateway
