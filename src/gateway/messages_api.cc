#include "gateway/messages_api.h"

#include "gateway/chat_completions.h"
#include "gateway/chat_request.h"
#include "gateway/context_summary.h"
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

wire::ClientJson compaction_block(const std::string& summary) {
  return {{"type", "compaction"}, {"content", summary}, {"encrypted_content", nullptr}};
}

// usage.iterations: the summary's own figures (the engine's, for writing it) before the
// answer's, which stay the message's usage.
void add_compaction_iteration(wire::ClientJson& usage, const json& summary) {
  if (!summary.contains("prompt_tokens")) return;
  const int64_t prompt = summary.value("prompt_tokens", int64_t{0});
  wire::ClientJson compaction =
      wire::anthropic_usage({.prompt_tokens = prompt,
                             .cached_tokens = std::min(summary.value("cached_tokens", int64_t{0}), prompt),
                             .completion_tokens = summary.value("generated_tokens", int64_t{0})});
  compaction["type"] = "compaction";
  wire::ClientJson message = usage;
  message.erase("iterations");
  message["type"] = "message";
  usage["iterations"] = wire::ClientJson::array({std::move(compaction), std::move(message)});
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
  in.edits = std::move(conv.edits);
  if (conv.carried_summary) put_carried_summary(in.body, *conv.carried_summary);
  return in;
}

void MessagesAdapter::answer(const json& response, std::string_view) {
  wire::ClientJson message = wire::chat_to_message(response, model_);
  if (context_) {
    if (context_->summary) {
      message["content"].insert(message["content"].begin(), compaction_block(*context_->summary));
      if (!context_->paused) add_compaction_iteration(message["usage"], context_->summary_usage);
    }
    message["context_management"] = {{"applied_edits", context_->applied_edits}};
  }
  writer_.send(200, kJsonHeaders, util::json_text(message));
}

std::vector<std::string> MessagesAdapter::start_events() {
  if (!stream_) stream_.emplace(model_, wire::message_id(util::random_id("chatcmpl-")));
  std::vector<std::string> events = {stream_->start()};
  if (context_) {
    stream_->set_context_management({{"applied_edits", context_->applied_edits}});
    if (context_->summary) {
      for (std::string& e : stream_->compaction(*context_->summary)) events.push_back(std::move(e));
    }
  }
  return events;
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
