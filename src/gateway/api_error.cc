#include "gateway/api_error.h"

#include <fmt/format.h>

#include "rescue/relaxed_json.h"

namespace kvgate::gateway {

using rescue::sanitize_utf8;

nlohmann::json ApiError::to_json() const {
  nlohmann::json e = extra.is_object() ? extra : nlohmann::json::object();
  // Messages and params quote client input (a path, a session id, a role); that input may be
  // invalid UTF-8 (a percent-decoded path), which JSON cannot carry and dump() would throw
  // on: such bytes become U+FFFD here, so every error can be answered.
  e["message"] = sanitize_utf8(message);
  e["type"] = type;
  e["param"] = param ? nlohmann::json(sanitize_utf8(*param)) : nlohmann::json(nullptr);
  e["code"] = code ? nlohmann::json(*code) : nlohmann::json(nullptr);
  return {{"error", e}};
}

ApiError client_closed(std::string message) {
  return {.status = kClientClosedStatus, .type = "server_error", .message = std::move(message),
          .code = "client_closed_request"};
}

ApiError bad_request(std::string message, std::optional<std::string> param, std::string code) {
  return {.status = 400, .type = "invalid_request_error", .message = std::move(message), .param = std::move(param),
          .code = std::move(code)};
}

ApiError unauthorized(std::string message) {
  return {.status = 401, .type = "authentication_error", .message = std::move(message), .code = "invalid_api_key"};
}

ApiError not_found(std::string message) {
  return {.status = 404, .type = "not_found_error", .message = std::move(message), .code = "not_found"};
}

ApiError method_not_allowed(std::string message) {
  return {.status = 405, .type = "invalid_request_error", .message = std::move(message), .code = "method_not_allowed"};
}

ApiError payload_too_large(size_t limit_bytes) {
  return {.status = 413,
          .type = "invalid_request_error",
          .message = fmt::format("request body exceeds the limit of {} bytes (kvgate up --max-body)", limit_bytes),
          .code = "payload_too_large"};
}

ApiError unavailable(std::string message, int retry_after_s) {
  return {.status = 503, .type = "server_error", .message = std::move(message), .code = "engine_unavailable",
          .retry_after_s = retry_after_s};
}

ApiError too_many_requests(std::string message, int retry_after_s) {
  return {.status = 429, .type = "rate_limit_error", .message = std::move(message), .code = "queue_full",
          .retry_after_s = retry_after_s};
}

ApiError gateway_timeout(std::string message) {
  return {.status = 504, .type = "server_error", .message = std::move(message), .code = "upstream_timeout"};
}

bool engine_went_away(const ApiError& error) {
  return error.code == "engine_unavailable" || error.code == "upstream_error";
}

ApiError bad_gateway(std::string message) {
  return {.status = 502, .type = "server_error", .message = std::move(message), .code = "upstream_error"};
}

ApiError internal_error(std::string message) {
  return {.status = 500, .type = "server_error", .message = std::move(message), .code = "internal_error"};
}

ApiError context_length_exceeded(std::string message) {
  return {.status = 400, .type = "invalid_request_error", .message = std::move(message),
          .code = "context_length_exceeded"};
}

}  // namespace kvgate::gateway
