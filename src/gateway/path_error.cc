#include "gateway/path_error.h"

#include "gateway/chat_completions.h"
#include "gateway/messages_api.h"
#include "util/json.h"
#include "wire/anthropic_reply.h"

namespace kvgate::gateway {

using http::ResponseWriter;

bool anthropic_path(std::string_view path) { return path.starts_with("/v1/messages"); }

std::string error_body(std::string_view path, const ApiError& error) {
  if (!anthropic_path(path)) return error.body();
  return util::json_text(wire::anthropic_error_body(anthropic_error_of(error)));
}

void send_error_for(std::string_view path, ResponseWriter& writer, const ApiError& error) {
  if (anthropic_path(path))
    return send_anthropic_error(writer, anthropic_error_of(error), error.retry_after_s);
  send_api_error(writer, error);
}

}  // namespace kvgate::gateway
