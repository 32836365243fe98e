#include "wire/output_sequence.h"

#include <nlohmann/json.hpp>

namespace kvgate::wire {

bool complete_json(const std::string& arguments) {
  // Cheap test first: a complete object or array ends with its closing bracket.
  size_t end = arguments.find_last_not_of(" \t\r\n");
  if (end == std::string::npos) return false;
  const char last = arguments[end];
  if (last != '}' && last != ']' && last != '"' && (last < '0' || last > '9') && last != 'e' && last != 'l') {
    return false;
  }
  return nlohmann::json::accept(arguments);
}

std::vector<BlockEvent> OutputSequencer::feed(const ChunkPieces& pieces) {
  std::vector<BlockEvent> out;
  if (finished_) return out;
  if (reply_id_.empty()) reply_id_ = pieces.id;
  if (pieces.finish_reason) finish_reason_ = pieces.finish_reason;
  if (pieces.usage) usage_ = pieces.usage;
  if (!pieces.stop_word.empty()) stop_word_ = pieces.stop_word;
  route_text(BlockKind::kReasoning, pieces.reasoning, out);
  route_text(BlockKind::kText, pieces.text, out);
  for (const ToolCallPiece& piece : pieces.tool_calls) route_call(piece, out);
  return out;
}

std::vector<BlockEvent> OutputSequencer::finish() {
  std::vector<BlockEvent> out;
  if (finished_) return out;
  drain(/*at_finish=*/true, out);
  finished_ = true;
  return out;
}

void OutputSequencer::route_text(BlockKind kind, const std::string& piece, std::vector<BlockEvent>& out) {
  if (piece.empty()) return;
  if (live_ && live_->segment.kind == kind) {
    delta(piece, out);
    return;
  }
  if (!waiting_.empty() && waiting_.back().kind == kind) {
    waiting_.back().buffer += piece;
  } else {
    waiting_.push_back({.kind = kind, .tool = 0, .buffer = piece});
  }
  drain(/*at_finish=*/false, out);
}

void OutputSequencer::route_call(const ToolCallPiece& piece, std::vector<BlockEvent>& out) {
  auto [it, is_new] = tools_.try_emplace(piece.index);
  Call& call = it->second;
  if (call.state == CallState::kClosed) return;  // trailing whitespace of complete arguments
  if (call.state == CallState::kWaiting) {
    if (call.id.empty()) call.id = piece.id;
    if (call.name.empty()) call.name = piece.name;
  }
  call.arguments += piece.arguments;
  if (call.state == CallState::kOpen) {
    delta(piece.arguments, out);
    // The open call may have just become complete: let what waits behind it go.
    if (!waiting_.empty()) drain(/*at_finish=*/false, out);
    return;
  }
  if (is_new) waiting_.push_back({.kind = BlockKind::kToolCall, .tool = piece.index, .buffer = {}});
  drain(/*at_finish=*/false, out);
}

void OutputSequencer::drain(bool at_finish, std::vector<BlockEvent>& out) {
  while (!waiting_.empty()) {
    if (live_) {
      if (!at_finish && !can_leave_live()) return;
      close_live(out);
    }
    if (!at_finish && !can_open(waiting_.front())) return;
    Segment next = std::move(waiting_.front());
    waiting_.pop_front();
    open(std::move(next), out);
  }
  if (at_finish && live_) close_live(out);
}

bool OutputSequencer::can_leave_live() const {
  if (live_->segment.kind != BlockKind::kToolCall) return true;
  return complete_json(tools_.at(live_->segment.tool).arguments);
}

bool OutputSequencer::can_open(const Segment& s) const {
  return s.kind != BlockKind::kToolCall || !tools_.at(s.tool).name.empty();
}

void OutputSequencer::open(Segment s, std::vector<BlockEvent>& out) {
  BlockEvent e{.type = BlockEvent::Type::kOpen, .block = next_block_++, .kind = s.kind};
  std::string pending = std::move(s.buffer);
  if (s.kind == BlockKind::kToolCall) {
    Call& call = tools_.at(s.tool);
    call.state = CallState::kOpen;
    if (call.id.empty()) call.id = fallback_call_id(reply_id_, s.tool);
    e.call_id = call.id;
    e.name = call.name;
    pending = call.arguments;
  }
  live_ = Live{.segment = std::move(s), .block = e.block};
  out.push_back(std::move(e));
  if (!pending.empty()) delta(pending, out);
}

void OutputSequencer::close_live(std::vector<BlockEvent>& out) {
  if (live_->segment.kind == BlockKind::kToolCall) tools_.at(live_->segment.tool).state = CallState::kClosed;
  out.push_back({.type = BlockEvent::Type::kClose, .block = live_->block, .kind = live_->segment.kind});
  live_.reset();
}

void OutputSequencer::delta(const std::string& piece, std::vector<BlockEvent>& out) {
  if (piece.empty()) return;
  out.push_back(
      {.type = BlockEvent::Type::kDelta, .block = live_->block, .kind = live_->segment.kind, .text = piece});
}

}  // namespace kvgate::wire
