#include "wire/anthropic_stream.h"

#include "wire/anthropic_reply.h"
#include "wire/sse_event.h"

namespace kvgate::wire {

namespace {

ClientJson block_start(const BlockEvent& e) {
  switch (e.kind) {
    case BlockKind::kReasoning:
      return {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}};
    case BlockKind::kText:
      return {{"type", "text"}, {"text", ""}};
    case BlockKind::kToolCall:
      break;
  }
  return {{"type", "tool_use"}, {"id", e.call_id}, {"name", e.name}, {"input", ClientJson::object()}};
}

ClientJson block_delta(const BlockEvent& e) {
  switch (e.kind) {
    case BlockKind::kReasoning:
      return {{"type", "thinking_delta"}, {"thinking", e.text}};
    case BlockKind::kText:
      return {{"type", "text_delta"}, {"text", e.text}};
    case BlockKind::kToolCall:
      break;
  }
  return {{"type", "input_json_delta"}, {"partial_json", e.text}};
}

}  // namespace

MessagesStream::MessagesStream(std::string model, std::string message_id)
    : model_(std::move(model)), message_id_(std::move(message_id)) {}

std::string MessagesStream::start(int64_t input_tokens) {
  if (started_) return {};
  started_ = true;
  ClientJson usage = {{"input_tokens", input_tokens},
                      {"cache_creation_input_tokens", 0},
                      {"cache_read_input_tokens", 0},
                      {"output_tokens", 0}};
  ClientJson message = {{"id", message_id_},
                        {"type", "message"},
                        {"role", "assistant"},
                        {"model", model_},
                        {"content", ClientJson::array()},
                        {"stop_reason", nullptr},
                        {"stop_sequence", nullptr},
                        {"usage", std::move(usage)}};
  return sse_event("message_start", {{"type", "message_start"}, {"message", std::move(message)}});
}

void MessagesStream::ensure_started(std::vector<std::string>& out) {
  if (!started_) out.push_back(start());
}

std::vector<std::string> MessagesStream::on_chunk(const nlohmann::json& chat_chunk) {
  std::vector<std::string> out;
  if (stopped_ || delta_sent_) return out;
  ensure_started(out);
  emit(sequencer_.feed(read_chunk(chat_chunk)), out);
  if (sequencer_.finish_reason() && sequencer_.usage()) send_message_delta(out);
  return out;
}

std::vector<std::string> MessagesStream::finish() {
  std::vector<std::string> out;
  if (stopped_) return out;
  ensure_started(out);
  if (!delta_sent_) send_message_delta(out);
  out.push_back(sse_event("message_stop", {{"type", "message_stop"}}));
  stopped_ = true;
  return out;
}

void MessagesStream::send_message_delta(std::vector<std::string>& out) {
  emit(sequencer_.finish(), out);
  const std::string finish = sequencer_.finish_reason().value_or("");
  const std::string reason =
      anthropic_stop_reason(finish, sequencer_.has_tool_calls(), sequencer_.stop_word());
  ClientJson stop_sequence =
      anthropic_stop_sequence(finish, sequencer_.has_tool_calls(), sequencer_.stop_word());
  ClientJson usage =
      sequencer_.usage() ? anthropic_usage(*sequencer_.usage()) : ClientJson{{"output_tokens", 0}};
  ClientJson delta = {{"type", "message_delta"},
                      {"delta", {{"stop_reason", reason}, {"stop_sequence", stop_sequence}}},
                      {"usage", std::move(usage)}};
  if (!context_management_.is_null()) delta["context_management"] = context_management_;
  out.push_back(sse_event("message_delta", delta));
  delta_sent_ = true;
}

std::vector<std::string> MessagesStream::compaction(const std::string& summary) {
  std::vector<std::string> out;
  if (stopped_ || delta_sent_ || first_block_ > 0) return out;
  ensure_started(out);
  const int64_t index = first_block_++;
  ClientJson empty = {{"type", "compaction"}, {"content", nullptr}, {"encrypted_content", nullptr}};
  out.push_back(
      sse_event("content_block_start",
                {{"type", "content_block_start"}, {"index", index}, {"content_block", std::move(empty)}}));
  ClientJson delta = {{"type", "compaction_delta"}, {"content", summary}, {"encrypted_content", nullptr}};
  out.push_back(sse_event("content_block_delta",
                          {{"type", "content_block_delta"}, {"index", index}, {"delta", std::move(delta)}}));
  out.push_back(sse_event("content_block_stop", {{"type", "content_block_stop"}, {"index", index}}));
  return out;
}

void MessagesStream::emit(const std::vector<BlockEvent>& events, std::vector<std::string>& out) const {
  for (const BlockEvent& e : events) {
    const auto index = first_block_ + static_cast<int64_t>(e.block);
    switch (e.type) {
      case BlockEvent::Type::kOpen:
        out.push_back(sse_event(
            "content_block_start",
            {{"type", "content_block_start"}, {"index", index}, {"content_block", block_start(e)}}));
        break;
      case BlockEvent::Type::kDelta:
        out.push_back(
            sse_event("content_block_delta",
                      {{"type", "content_block_delta"}, {"index", index}, {"delta", block_delta(e)}}));
        break;
      case BlockEvent::Type::kClose:
        out.push_back(sse_event("content_block_stop", {{"type", "content_block_stop"}, {"index", index}}));
        break;
    }
  }
}

std::string MessagesStream::ping() { return sse_event("ping", {{"type", "ping"}}); }

std::string MessagesStream::error(std::string_view type, std::string_view message) {
  return sse_event("error", {{"type", "error"}, {"error", {{"type", type}, {"message", message}}}});
}

}  // namespace kvgate::wire
