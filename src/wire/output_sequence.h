// OutputSequencer: turns the pieces of a streamed chat completion into a sequence of output
// blocks — reasoning, text, one per tool call — each opened, filled and closed once, one
// open at a time, as both the Anthropic and the Responses streams present them.
//
// Chat chunks interleave freely: a tool call's arguments may arrive in many pieces, calls
// are addressed by index and could alternate, text could follow a call. The block formats
// cannot reopen a closed block, so:
//   - a piece for the open block is emitted at once;
//   - a piece for another block waits in arrival order while the open block is a tool call
//     whose arguments are not yet a complete JSON value (its next piece may still come);
//     otherwise the open block closes and the waiting blocks open in order;
//   - a tool call opens only once its name is known (the name belongs in the open event;
//     the first non-empty name a call gets is its name);
//   - finish() closes the open block and emits every waiting block whole.
// Blocks open in the order their first pieces arrive. llama-server streams reasoning, then
// text, then the calls one after another in index order, so nothing waits in practice and
// every piece goes out as it arrives. A piece for a tool call whose
// block already closed (its arguments were complete) can only be trailing whitespace in a
// valid call and is dropped. The concatenated deltas of each block are what the chunks
// carried for it.
//
// Thread-safety: none; one sequencer per streamed reply.
#pragma once

#include <cstddef>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "wire/chat_reply.h"

namespace kvgate::wire {

enum class BlockKind { kReasoning, kText, kToolCall };

struct BlockEvent {
  enum class Type { kOpen, kDelta, kClose };
  Type type = Type::kOpen;
  size_t block = 0;  // 0, 1, 2, … in the order blocks open
  BlockKind kind = BlockKind::kText;
  std::string text;     // kDelta: the piece
  std::string call_id;  // kOpen of a tool call
  std::string name;     // kOpen of a tool call
};

class OutputSequencer {
 public:
  std::vector<BlockEvent> feed(const ChunkPieces& pieces);
  // Closes the open block and emits the waiting ones. Later feed()s emit nothing.
  std::vector<BlockEvent> finish();

  bool finished() const { return finished_; }
  // The last finish reason, usage and stop word seen in any chunk.
  const std::optional<std::string>& finish_reason() const { return finish_reason_; }
  const std::optional<ChatUsage>& usage() const { return usage_; }
  const std::string& stop_word() const { return stop_word_; }
  const std::string& reply_id() const { return reply_id_; }
  bool has_tool_calls() const { return !tools_.empty(); }

 private:
  enum class CallState { kWaiting, kOpen, kClosed };
  struct Call {
    std::string id;
    std::string name;
    std::string arguments;
    CallState state = CallState::kWaiting;
  };
  struct Segment {
    BlockKind kind = BlockKind::kText;
    size_t tool = 0;     // kToolCall: the call's index
    std::string buffer;  // reasoning/text waiting to be emitted
  };
  struct Live {
    Segment segment;
    size_t block = 0;
  };

  void route_text(BlockKind kind, const std::string& piece, std::vector<BlockEvent>& out);
  void route_call(const ToolCallPiece& piece, std::vector<BlockEvent>& out);
  void drain(bool at_finish, std::vector<BlockEvent>& out);
  bool can_leave_live() const;
  bool can_open(const Segment& s) const;
  void open(Segment s, std::vector<BlockEvent>& out);
  void close_live(std::vector<BlockEvent>& out);
  void delta(const std::string& piece, std::vector<BlockEvent>& out);

  std::optional<Live> live_;
  std::deque<Segment> waiting_;
  std::map<size_t, Call> tools_;
  size_t next_block_ = 0;
  std::string reply_id_;
  std::optional<std::string> finish_reason_;
  std::optional<ChatUsage> usage_;
  std::string stop_word_;
  bool finished_ = false;
};

// Whether `arguments` is a complete JSON value (what a tool call's arguments are once the
// engine has written them all).
bool complete_json(const std::string& arguments);

}  // namespace kvgate::wire
