// ContextEdits: the context management a client asks the server for, in one neutral form the
// gateway serves with its own compaction (docs/GATEWAY.md, "Context management"):
//
//   Anthropic `context_management.edits` (POST /v1/messages):
//     clear_tool_uses_20250919  trigger {input_tokens | tool_uses} (default 100,000 input
//                               tokens), keep {tool_uses} (default 3), clear_at_least
//                               {input_tokens}, exclude_tools, clear_tool_inputs
//     clear_thinking_20251015   accepted: kvgate drops earlier turns' reasoning from every
//                               request already
//     compact_20260112          trigger {input_tokens} (default 150,000), instructions,
//                               pause_after_compaction
//   Responses `context_management` (POST /v1/responses): [{"type": "compaction",
//   "compact_threshold": N}] → a compaction at N input tokens.
//
// A summary the server wrote comes back in later requests: an Anthropic `compaction` block
// (its `content`), a Responses `compaction` item (its `encrypted_content`, which kvgate writes
// as compaction_token() and reads back with summary_of_compaction_token()). Everything before
// it is replaced by it, as both APIs specify.
//
// Errors are 400 invalid_request_error naming the field's path.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "wire/wire_error.h"

namespace kvgate::wire {

struct ClearToolUses {
  uint64_t trigger_tokens = 100000;  // applies above this many input tokens ...
  uint64_t trigger_tool_uses = 0;    // ... or, when set, above this many tool uses
  uint64_t keep = 3;                 // the newest tool uses left as they are
  uint64_t clear_at_least = 0;       // tokens: a clearing that frees fewer is not done
  std::vector<std::string> exclude_tools;
  bool clear_inputs = false;  // asked for; kvgate clears the results only (the calls stay)
};

struct CompactEdit {
  uint64_t trigger_tokens = 150000;
  std::string instructions;  // replaces kvgate's summary instruction when not empty
  bool pause = false;        // answer with the compaction alone, nothing sampled after it
};

struct ContextEdits {
  std::optional<ClearToolUses> clear_tool_uses;
  std::optional<CompactEdit> compact;
  bool requested = false;  // the request carried context management (its answer reports it)
};

// The value of an Anthropic request's `context_management`.
WireResult<ContextEdits> anthropic_context_edits(const ClientJson& value);
// The value of a Responses request's `context_management`.
WireResult<ContextEdits> responses_context_edits(const ClientJson& value);

// A Responses compaction item's `encrypted_content` for a summary kvgate wrote, and the
// summary back from one (nullopt: not written by kvgate).
std::string compaction_token(std::string_view summary);
std::optional<std::string> summary_of_compaction_token(std::string_view token);

}  // namespace kvgate::wire
