// ApiError: an error answered to a client in OpenAI's format.
//
//   {"error": {"message": "...", "type": "invalid_request_error", "param": "messages[2].role",
//              "code": "invalid_value"}}
//
// Every failure the gateway reports to a client goes through this type and one mapper
// (to_json + status), so status codes and shapes are consistent across routes. Messages say
// what was wrong, where (the field path) and, where useful, what to do. Functions that can
// refuse a request return ApiResult<T> / ApiStatus (util/result.h with ApiError as the
// error); a wire API other than chat completions renders the same ApiError in its own shape.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "util/json.h"
#include "util/result.h"

namespace kvgate::gateway {

struct ApiError {
  int status = 500;
  std::string type = "server_error";
  std::string message;
  std::optional<std::string> param;
  std::optional<std::string> code;
  std::optional<int> retry_after_s;  // sent as a Retry-After header (429/503)
  nlohmann::json extra = nlohmann::json::object();  // extra fields inside "error" (e.g. n_ctx)

  nlohmann::json to_json() const;
  std::string body() const { return util::json_text(to_json()); }
};

// The status of a request whose client closed its connection before the answer (nginx's 499):
// logged and counted, never written (nobody is there to read it).
inline constexpr int kClientClosedStatus = 499;
ApiError client_closed(std::string message);
inline bool client_left(const ApiError& error) { return error.status == kClientClosedStatus; }

ApiError bad_request(std::string message, std::optional<std::string> param = std::nullopt,
                     std::string code = "invalid_value");
ApiError unauthorized(std::string message);
ApiError not_found(std::string message);
ApiError method_not_allowed(std::string message);
ApiError payload_too_large(size_t limit_bytes);
ApiError unavailable(std::string message, int retry_after_s);
ApiError too_many_requests(std::string message, int retry_after_s);
ApiError gateway_timeout(std::string message);
// The engine failed: 502 with the engine's own message where it gave one.
ApiError bad_gateway(std::string message);
ApiError internal_error(std::string message);
// 400 context_length_exceeded: the conversation cannot be brought within the engine's context.
ApiError context_length_exceeded(std::string message);
// The engine could not be reached or broke off (unavailable, bad_gateway): another engine may
// serve the request.
bool engine_went_away(const ApiError& error);

template <typename T>
using ApiResult = Result<T, ApiError>;
using ApiStatus = Result<void, ApiError>;

}  // namespace kvgate::gateway
