#include "gateway/messages_api.h"

#include "gateway/chat_completions.h"
#include "gateway/chat_request.h"
#include "gateway/json_headers.h"
#include "util/json.h"
#include "util/log.h"
#include "util/random_id.h"
#include "wire/anthropic_reply.h"
#include "wire/anthropic_request.h"

namespace kvgate::gateway {

using http::HeaderList;
using http::HttpRequest;
using http::ResponseWriter;

using nlohmann::json;

namespace {

RelayOptions with_pings(RelayOptions relay) {
  relay.keepalive_text = [](std::string_view) { return wire::MessagesStream::ping(); };
  return relay;
}

}  // namespace

void log_ignored(std::string_view api, const std::vector<std::string>& ignored) {
  if (ignored.empty()) return;
  util::log_event(util::LogLevel::kDebug, "wire_fields_ignored", {{"api", api}, {"fields", ignored}});
}

void send_anthropic_error(ResponseWriter& writer, const wire::WireError& error,
                          std::optional<int> retry_after_s) {
  HeaderList headers = kJsonHeaders;
  if (retry_after_s) headers.emplace_back("Retry-After", std::to_string(*retry_after_s));
  writer.send(error.status, headers, util::json_text(wire::anthropic_error_body(error)));
}

wire::WireError anthropic_error_of(const ApiError& error) {
  return wire::anthropic_error_from_openai(error.status, error.to_json());
}

MessagesAdapter::MessagesAdapter(ResponseWriter& writer, RelayOptions relay, std::string model)
    : EventOutput(writer, with_pings(std::move(relay))), model_(std::move(model)) {}

wire::WireResult<TurnInput> MessagesAdapter::input(const HttpRequest& request, std::string scope,
                                                   std::string& model) {
  auto body = parse_client_json_body(request.body);
  if (!body.ok()) return wire::invalid_request(body.error().param.value_or(""), body.error().message);
  KV_ASSIGN_OR_RETURN(wire::ChatConversion conv, wire::messages_to_chat(*body));
  model = conv.model;
  log_ignored("messages", conv.ignored);
  TurnInput in;
  in.name = header_conversation(request.header("x-session-id"));
  in.stream = conv.stream;
  in.include_usage = true;  // message_delta carries the usage
  in.body = std::move(conv.chat);
  in.tools_text = std::move(conv.tools_text);
  in.scope = std::move(scope);
  in.api = "messages";
  return in;
}

void MessagesAdapter::answer(const json& response, std::string_view) {
  writer_.send(200, kJsonHeaders, util::json_text(wire::chat_to_message(response, model_)));
}

std::vector<std::string> MessagesAdapter::start_events() {
  if (!stream_) stream_.emplace(model_, wire::message_id(util::random_id("chatcmpl-")));
  return {stream_->start()};
}

std::vector<std::string> MessagesAdapter::chunk_events(const json& chunk) { return stream_->on_chunk(chunk); }

std::vector<std::string> MessagesAdapter::finish_events() { return stream_->finish(); }

std::vector<std::string> MessagesAdapter::error_events(const ApiError& error) {
  const wire::WireError e = anthropic_error_of(error);
  return {wire::MessagesStream::error(e.type, e.message)};
}

void MessagesAdapter::send_error(const ApiError& error) {
  send_anthropic_error(writer_, anthropic_error_of(error), error.retry_after_s);
}

}  // namespace kvgate::gateway
