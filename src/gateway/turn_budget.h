// The token arithmetic of a turn, pure: where the watermarks are, how much room the reply
// keeps, whether the prompt must be counted exactly, and what a compaction aims at.
//
// Counting a prompt exactly (the engine's template and tokenizer, upstream/tokens.h) costs engine
// calls, so it is done only where it decides something: near the high watermark. When the
// view extends the previous turn's view, an upper bound decides whether it is near: the
// engine's own count of the previous prompt (which covers its reply too, since the reply is
// in the view as the assistant message) plus, per added message, its JSON text in bytes (a
// token is at least one byte) and 16 tokens of template markup, plus 64 for the generation
// prompt.
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>

#include <nlohmann/json.hpp>

namespace kvgate::gateway {

struct Watermarks {
  uint64_t high = 0;  // past it (prompt + the reply's room) a turn compacts first; 0: never
  uint64_t low = 0;   // where a compaction brings the conversation
};

// high: `high_tokens` when given, else `high_fraction` of the slot's context (0 when the
// context is unknown); low: `low_fraction` of high.
Watermarks watermarks(uint64_t context, std::optional<uint64_t> high_tokens, double high_fraction,
                      double low_fraction);

// The room kept for the reply: the request's own limit when it set a positive one, else
// `default_reserve`.
uint64_t reply_reserve(std::optional<int64_t> max_tokens, uint64_t default_reserve);

// What a watermark compaction aims at: the low watermark less the reply's room (the low
// watermark itself when the room is larger).
uint64_t compaction_target(uint64_t low, uint64_t reserve);

// The upper bound above on the prompt of `view`, when it extends `last_view` (every message
// of the previous view is there unchanged, in its place) and the engine counted the previous
// prompt as `last_tokens`; nullopt when nothing is known or the view does not extend it.
std::optional<uint64_t> extended_prompt_bound(const nlohmann::json& last_view, uint64_t last_tokens,
                                              const nlohmann::json& view);

// Whether the prompt is counted exactly: counting is on, and either nothing bounds it or
// compaction is on and the bound with the reply's room passes the high watermark.
bool needs_exact_count(bool count_tokens, std::optional<uint64_t> bound, bool compaction, uint64_t high,
                       uint64_t reserve);

// The target of the compaction after the engine refused a prompt as longer than its
// context: 60 % of the larger of kvgate's count and the engine's, and, when the engine said
// its context, no more than that context's low watermark less the reply's room.
uint64_t overflow_target(uint64_t counted, uint64_t engine_prompt_tokens, uint64_t engine_context,
                         double high_fraction, double low_fraction, uint64_t reserve);

// The max_tokens that lets a reply use the rest of the slot's context and no more (the last
// cell stays free); nullopt when the context or the prompt is unknown, the prompt fills the
// context, or the request's own positive limit already fits.
std::optional<uint64_t> reply_room(uint64_t context, uint64_t prompt, std::optional<int64_t> max_tokens);

}  // namespace kvgate::gateway
