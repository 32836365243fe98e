#include "gateway/responses_api.h"

#include <chrono>

#include "gateway/chat_completions.h"
#include "util/json.h"
#include "util/random_id.h"
#include "wire/responses_reply.h"

namespace kvgate::gateway {

using http::HeaderList;
using http::HttpRequest;
using http::ResponseWriter;

using nlohmann::json;

namespace {

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

ResponsesAdapter::ResponsesAdapter(ResponseWriter& writer, RelayOptions relay, wire::ResponsesConversion conversion)
    : EventOutput(writer, std::move(relay)),
      conversion_(std::move(conversion)),
      id_(util::random_id("resp_")),
      created_at_(unix_seconds()) {}

TurnInput ResponsesAdapter::input(const HttpRequest& request, std::string scope) const {
  TurnInput in;
  if (auto header = request.header("x-session-id")) {
    if (auto id = usable_conversation_id(*header)) in.name = ConversationName{*id, "header"};
  }
  if (!in.name && conversion_.session_key) {
    if (auto id = usable_conversation_id(*conversion_.session_key)) {
      in.name = ConversationName{"cache:" + *id, "prompt_cache_key"};
    }
  }
  in.stream = conversion_.stream;
  in.include_usage = true;  // the final response carries the usage
  in.body = conversion_.chat;
  in.scope = std::move(scope);
  in.api = "responses";
  return in;
}

void ResponsesAdapter::answer(const json& response, std::string_view) {
  final_ = wire::chat_to_response(response, conversion_, id_, created_at_);
  if (keep_) keep_(*final_);
  writer_.send(200, {{"Content-Type", "application/json"}}, util::json_text(*final_));
}

std::vector<std::string> ResponsesAdapter::start_events() {
  if (!stream_) stream_.emplace(conversion_, id_, created_at_);
  return stream_->start();
}

std::vector<std::string> ResponsesAdapter::chunk_events(const json& chunk) { return stream_->on_chunk(chunk); }

std::vector<std::string> ResponsesAdapter::finish_events() {
  auto events = stream_->finish();
  final_ = stream_->response();
  if (keep_) keep_(*final_);
  return events;
}

std::vector<std::string> ResponsesAdapter::error_events(const ApiError& error) {
  return stream_->failed(wire::WireError{.status = error.status, .type = error.type, .message = error.message,
                                         .param = error.param.value_or("")});
}

void ResponsesAdapter::send_error(const ApiError& error) { send_api_error(writer_, error); }

}  // namespace kvgate::gateway
