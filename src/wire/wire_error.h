// WireError: a request the wire formats (Anthropic Messages, OpenAI Responses) refuse, or a
// failure they report, in the API's own vocabulary.
//
// `type` is the API's error type ("invalid_request_error", "overloaded_error", ...), `param`
// the path of the offending field ("messages.3.content.1.tool_use_id"; empty when no field is
// to blame). Conversions return Result<T, WireError> so the gateway answers a client in the
// format it spoke; the bodies are written by anthropic_reply.h and responses_reply.h.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "util/result.h"

namespace kvgate::wire {

struct WireError {
  int status = 400;
  std::string type = "invalid_request_error";
  std::string message;
  std::string param;
};

template <typename T>
using WireResult = Result<T, WireError>;

// Requests and answers as clients write and read them keep their keys in order: a tool
// call's input object goes back to the engine with the keys in the order the model wrote
// them, so the prompt rendered for the next turn repeats the one the engine has cached.
using ClientJson = nlohmann::ordered_json;

// 400 invalid_request_error naming the field: message "PARAM: WHAT".
inline WireError invalid_request(std::string param, const std::string& what) {
  WireError e;
  e.message = param.empty() ? what : param + ": " + what;
  e.param = std::move(param);
  return e;
}

}  // namespace kvgate::wire
