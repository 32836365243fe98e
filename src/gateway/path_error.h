// The error answer of a request no route's adapter has taken yet (a refused head, a failure
// outside any route, the fleet with no engine up): in the shape its path's API reads,
// Anthropic's on /v1/messages routes and OpenAI's elsewhere.
#pragma once

#include <string>
#include <string_view>

#include "gateway/api_error.h"
#include "http/http_server.h"

namespace kvgate::gateway {

// Whether `path` is an Anthropic Messages route, whose clients read errors in its shape.
bool anthropic_path(std::string_view path);
// The JSON body of `error` answered on `path`.
std::string error_body(std::string_view path, const ApiError& error);
// Sends `error` in the shape `path`'s API reads.
void send_error_for(std::string_view path, http::ResponseWriter& writer, const ApiError& error);

}  // namespace kvgate::gateway
