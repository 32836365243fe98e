// Tool-result clearing: the results of all but the newest tool uses of a conversation
// replaced by a marker, as Anthropic's clear_tool_uses edit asks. Served as L1 truncations
// that keep nothing of the text (conversation.h): decided once per message and applied the
// same way on every later turn, so the prompt changes only where a result is cleared and
// grows at its end again from the next turn on.
//
// Pure: counting is a callback; the conversation is changed only when the clearing is done.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "session/compactor.h"
#include "session/conversation.h"
#include "util/result.h"

namespace kvgate::session {

struct ToolClearing {
  uint64_t keep = 3;                       // the newest tool results left as they are
  uint64_t clear_at_least = 0;             // tokens: clear nothing unless this many go
  std::vector<std::string> exclude_tools;  // results of these tools are never cleared
};

struct ToolClearingResult {
  uint64_t cleared = 0;  // tool results cleared now
  uint64_t tokens = 0;   // their text's tokens (count_text)
};

// Tool results kvgate still has of `c` (its kept messages), cleared or not.
uint64_t tool_results(const Conversation& c);

// Clears the tool results of `c` older than the newest `keep` (those of excluded tools and
// those cleared before are left alone). Nothing changes when fewer than `clear_at_least`
// tokens would go; an error when counting fails.
Result<ToolClearingResult> clear_tool_results(Conversation& c, const ToolClearing& spec,
                                              const TextCountFn& count_text);

}  // namespace kvgate::session
