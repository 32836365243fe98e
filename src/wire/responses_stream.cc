#include "wire/responses_stream.h"

#include "wire/responses_reply.h"
#include "wire/sse_event.h"

namespace kvgate::wire {

ResponsesStream::ResponsesStream(ResponsesConversion conversion, std::string response_id, int64_t created_at)
    : conversion_(std::move(conversion)), response_id_(std::move(response_id)), created_at_(created_at) {
  response_ = response_object(conversion_, response_id_, created_at_, ResponseStatus::kInProgress,
                              ClientJson::array(), std::nullopt);
}

std::string ResponsesStream::event(const std::string& type, ClientJson fields) {
  ClientJson e = {{"type", type}, {"sequence_number", sequence_++}};
  for (auto& [key, value] : fields.items()) e[key] = std::move(value);
  return sse_event(type, e);
}

std::vector<std::string> ResponsesStream::start() {
  std::vector<std::string> out;
  if (started_) return out;
  started_ = true;
  out.push_back(event("response.created", {{"response", response_}}));
  out.push_back(event("response.in_progress", {{"response", response_}}));
  return out;
}

std::vector<std::string> ResponsesStream::compaction(const std::string& encrypted_content) {
  std::vector<std::string> out;
  if (ended_ || first_item_ > 0 || !items_.empty()) return out;
  ensure_started(out);
  const int64_t index = first_item_++;
  ClientJson item = compaction_item(response_id_, encrypted_content);
  out.push_back(event("response.output_item.added", {{"output_index", index}, {"item", item}}));
  output_.push_back(item);
  out.push_back(event("response.output_item.done", {{"output_index", index}, {"item", std::move(item)}}));
  return out;
}

void ResponsesStream::ensure_started(std::vector<std::string>& out) {
  if (started_) return;
  for (std::string& e : start()) out.push_back(std::move(e));
}

std::vector<std::string> ResponsesStream::on_chunk(const nlohmann::json& chat_chunk) {
  std::vector<std::string> out;
  if (ended_) return out;
  ensure_started(out);
  emit(sequencer_.feed(read_chunk(chat_chunk)), /*incomplete=*/false, out);
  return out;
}

std::vector<std::string> ResponsesStream::finish() {
  std::vector<std::string> out;
  if (ended_) return out;
  ensure_started(out);
  const bool incomplete = sequencer_.finish_reason() == "length";
  emit(sequencer_.finish(), incomplete, out);
  const ResponseStatus status = incomplete ? ResponseStatus::kIncomplete : ResponseStatus::kCompleted;
  response_ = response_object(conversion_, response_id_, created_at_, status, output_, sequencer_.usage());
  out.push_back(event(incomplete ? "response.incomplete" : "response.completed", {{"response", response_}}));
  ended_ = true;
  return out;
}

std::vector<std::string> ResponsesStream::failed(const WireError& error) {
  std::vector<std::string> out;
  if (ended_) return out;
  ensure_started(out);
  const char* code = error.status == 429                         ? "rate_limit_exceeded"
                     : error.status >= 400 && error.status < 500 ? "invalid_prompt"
                                                                 : "server_error";
  response_ = response_object(conversion_, response_id_, created_at_, ResponseStatus::kFailed, output_,
                              sequencer_.usage(), {{"code", code}, {"message", error.message}});
  out.push_back(event("response.failed", {{"response", response_}}));
  ended_ = true;
  return out;
}

void ResponsesStream::emit(const std::vector<BlockEvent>& events, bool incomplete,
                           std::vector<std::string>& out) {
  size_t blocks = items_.size();
  for (const BlockEvent& e : events) blocks += e.type == BlockEvent::Type::kOpen ? 1 : 0;
  for (const BlockEvent& e : events) {
    switch (e.type) {
      case BlockEvent::Type::kOpen:
        open_item(e, out);
        break;
      case BlockEvent::Type::kDelta:
        delta_item(e, out);
        break;
      case BlockEvent::Type::kClose:
        close_item(e, incomplete && e.block + 1 == blocks, out);
        break;
    }
  }
}

void ResponsesStream::open_item(const BlockEvent& e, std::vector<std::string>& out) {
  items_.push_back({.kind = e.kind, .call_id = e.call_id, .name = e.name, .text = {}});
  const auto index = first_item_ + static_cast<int64_t>(e.block);
  ClientJson item = output_item(e.kind, response_id_, e.block, "", e.call_id, e.name, "in_progress");
  const std::string id = item["id"];
  out.push_back(event("response.output_item.added", {{"output_index", index}, {"item", std::move(item)}}));
  if (e.kind == BlockKind::kToolCall) return;
  ClientJson part = e.kind == BlockKind::kReasoning ? ClientJson{{"type", "reasoning_text"}, {"text", ""}}
                                                    : output_text_part("");
  out.push_back(
      event("response.content_part.added",
            {{"item_id", id}, {"output_index", index}, {"content_index", 0}, {"part", std::move(part)}}));
}

void ResponsesStream::delta_item(const BlockEvent& e, std::vector<std::string>& out) {
  Item& item = items_.at(e.block);
  item.text += e.text;
  const auto index = first_item_ + static_cast<int64_t>(e.block);
  const std::string id = item_id(e.kind, response_id_, e.block);
  switch (e.kind) {
    case BlockKind::kReasoning:
      out.push_back(
          event("response.reasoning_text.delta",
                {{"item_id", id}, {"output_index", index}, {"content_index", 0}, {"delta", e.text}}));
      return;
    case BlockKind::kText:
      out.push_back(event("response.output_text.delta", {{"item_id", id},
                                                         {"output_index", index},
                                                         {"content_index", 0},
                                                         {"delta", e.text},
                                                         {"logprobs", ClientJson::array()}}));
      return;
    case BlockKind::kToolCall:
      break;
  }
  out.push_back(event("response.function_call_arguments.delta",
                      {{"item_id", id}, {"output_index", index}, {"delta", e.text}}));
}

void ResponsesStream::close_item(const BlockEvent& e, bool last, std::vector<std::string>& out) {
  const Item& item = items_.at(e.block);
  const auto index = first_item_ + static_cast<int64_t>(e.block);
  const std::string id = item_id(e.kind, response_id_, e.block);
  switch (e.kind) {
    case BlockKind::kReasoning:
      out.push_back(
          event("response.reasoning_text.done",
                {{"item_id", id}, {"output_index", index}, {"content_index", 0}, {"text", item.text}}));
      out.push_back(
          event("response.content_part.done", {{"item_id", id},
                                               {"output_index", index},
                                               {"content_index", 0},
                                               {"part", {{"type", "reasoning_text"}, {"text", item.text}}}}));
      break;
    case BlockKind::kText:
      out.push_back(event("response.output_text.done", {{"item_id", id},
                                                        {"output_index", index},
                                                        {"content_index", 0},
                                                        {"text", item.text},
                                                        {"logprobs", ClientJson::array()}}));
      out.push_back(event("response.content_part.done", {{"item_id", id},
                                                         {"output_index", index},
                                                         {"content_index", 0},
                                                         {"part", output_text_part(item.text)}}));
      break;
    case BlockKind::kToolCall:
      out.push_back(event("response.function_call_arguments.done",
                          {{"item_id", id}, {"output_index", index}, {"arguments", item.text}}));
      break;
  }
  ClientJson done = output_item(e.kind, response_id_, e.block, item.text, item.call_id, item.name,
                                last ? "incomplete" : "completed");
  output_.push_back(done);
  out.push_back(event("response.output_item.done", {{"output_index", index}, {"item", std::move(done)}}));
}

}  // namespace kvgate::wire
