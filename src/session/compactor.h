// Compactor: brings a conversation's view under a token target, cheapest step first.
//
//   L1  over-long single messages (tool output above `l1_threshold_tokens`) become head +
//       marker + tail; the decision is stored per message so it renders the same way on
//       every later turn;
//   L2  the oldest turns are replaced by a summary (rolling: the previous summary is folded
//       in). The summary comes from `summarize` (the engine, asked as a continuation of the
//       prompt it already has cached) or, if that fails, from an extractive summary;
//   L3  more of the oldest turns are dropped, whole turns only (an assistant message with
//       tool calls and its tool results go together); the system message and the most
//       recent user message always stay.
// The result always fits, or compact() says exactly why it cannot (the system message plus
// the newest user message alone exceed the target, or `time_limit` passed).
//
// compact() is deterministic given its inputs and does no I/O itself: counting and
// summarising are callbacks, so it is unit-testable and the gateway decides how to reach
// the engine. Cut points are always at the start of a user turn.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "session/conversation.h"
#include "util/result.h"

namespace kvgate::session {

struct CompactionOptions {
  uint64_t l1_threshold_tokens = 4096;  // messages above this are truncated by L1
  uint64_t l1_keep_tokens = 1024;       // what a truncated message keeps (3/4 head, 1/4 tail)
  uint64_t summary_max_tokens = 512;
  bool summary_after_tail = false;      // layout for engines that shift cached chunks
  // false: no L2 — the oldest turns are dropped, not summarised (a conversation whose client
  // keeps a sliding window: a summary would stand for messages its next request no longer
  // carries, which the isolation invariant forbids sending, so it would be dropped then).
  bool summaries = true;
  // When the target cannot be reached (the system message and the newest user message, or a
  // newest tool result, take more): a view of at most this many tokens is still accepted
  // (the prompt fits the context with the reply's room, above the low watermark). Zero: the
  // target or an error.
  uint64_t fit_tokens = 0;
  // The time one compact() may take (its counting and summary calls included); past it,
  // compact() fails with an error saying so. Zero: no limit.
  std::chrono::milliseconds time_limit{0};
  // The model summary is asked as a continuation of the current view; a view larger than
  // this (tokens; the engine's context) cannot be sent, so the model is asked with a view
  // whose oldest turns are replaced by their extractive summary, small enough to fit with
  // the instruction and the summary (kSummaryRequestTokens + summary_max_tokens), and the
  // summary is extractive only when not even the last turns fit. Zero: no limit.
  uint64_t summary_prompt_limit = 0;
};

// What a summary request adds to the view besides the summary: the instruction, the
// template's turn markers and a margin.
inline constexpr uint64_t kSummaryRequestTokens = 256;

// Exact prompt tokens of a view (the messages sent upstream, with tools etc.).
using ViewCountFn = std::function<Result<uint64_t>(const nlohmann::json& view)>;
// Tokens of one text.
using TextCountFn = std::function<Result<uint64_t>(const std::string& text)>;
// Writes a summary of history[first .. until) of `c` (the engine sees the current view, or,
// when that is larger than its context, `c` is the conversation from a later turn on with an
// extractive summary of what came before); returns the text.
using SummarizeFn = std::function<Result<std::string>(const Conversation& c, uint64_t until, uint64_t max_tokens)>;

struct CompactionResult {
  Conversation conversation;
  std::string level;           // highest rung used: "L1", "L2", "L3"
  uint64_t tokens_before = 0;
  uint64_t tokens_after = 0;
  std::string summary_source;  // "model", "extractive" or "" (no L2)
  std::string summary_error;   // why the model summary was not used, if it was not
  // The model was asked with a view from this history index on (the turns before it given as
  // their extractive summary) because the whole view was larger than the engine's context;
  // 0: the whole view.
  uint64_t summary_view_from = 0;
  uint64_t dropped_messages = 0;
  uint64_t truncated_messages = 0;
};

// `first_new` is the history index of the first message that arrived with the current
// request (where an after-tail summary is placed).
Result<CompactionResult> compact(const Conversation& c, uint64_t target_tokens, uint64_t first_new,
                                 const ViewCountFn& count_view, const TextCountFn& count_text,
                                 const SummarizeFn& summarize, const CompactionOptions& options);

// The fallback summary: per message its first and last sentence, tool names and
// arguments, file paths, numbers and error lines; previous summary first. At most
// `max_chars` bytes (cut at a UTF-8 boundary).
std::string extractive_summary(const Conversation& c, uint64_t until, size_t max_chars);

// Text of a message's content (string or text parts), for counting and summaries.
std::string message_text(const nlohmann::json& message);

}  // namespace kvgate::session
