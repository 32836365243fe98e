// TurnLog: what each turn of a conversation sent and what it cost, and where its prompt
// stopped extending the previous one (the prefix-break inspector's data).
//
// A turn is one chat request of a session. Its record holds the engine's figures (prompt,
// cached, prefilled, completion tokens, TTFT), the compactions it ran, and — when its
// prompt did not extend the previous turn's — a PrefixBreak: the first message of the view
// that differs, the first differing byte of that message (and of the rendered prompt when
// both renderings are known), excerpts of both versions around that point, the cause the
// chat flow named (stabiliser.h's BreakCause), and the tokens recomputed: tokens of the
// previous prompt and reply that the engine did not take from its cache.
//
// Records are kept in memory only, the last `capacity` per session (default 64). Pure apart from that;
// not thread-safe (a Session guards its log with its `mu`).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace kvgate::session {

struct Excerpt {
  std::string same;     // text before the divergence (identical in both versions)
  std::string differs;  // text from the divergence on
};

struct PrefixBreak {
  std::string cause;   // cause_name(): client_edit, compaction, slot_eviction, ...
  std::string detail;
  size_t message = 0;  // first view message that differs
  std::optional<std::string> role_before, role_after;  // nullopt: the view has no such message
  std::optional<size_t> byte_in_message;               // first differing byte of its shown text
  std::optional<size_t> prompt_byte;                   // of the rendered prompts, when both known
  Excerpt before, after;
};

// Where `after` (this turn's view) first differs from `before` (the previous turn's), with
// excerpts of at most `context_bytes` on each side of the divergence. The shown text of a
// message is its content, then its tool calls; when those are equal, its JSON. Excerpts
// never split a UTF-8 character. `before_prompt`/`after_prompt`: the renderings, "" if unknown.
PrefixBreak locate_break(const nlohmann::json& before, const nlohmann::json& after, const std::string& before_prompt,
                         const std::string& after_prompt, size_t context_bytes = 240);

struct TurnRecord {
  uint64_t n = 0;  // 1-based, per session
  int64_t ts_ms = 0;
  int status = 0;
  size_t messages = 0, view_messages = 0;
  int slot = -1;
  std::string recognised_by;
  uint64_t prompt_tokens = 0, cached_tokens = 0, prefilled_tokens = 0, completion_tokens = 0;
  uint64_t recomputed_tokens = 0;
  std::optional<double> ttft_ms;
  double total_ms = 0;
  nlohmann::json compactions = nlohmann::json::array();  // {level, trigger, tokens_before, tokens_after}
  std::optional<PrefixBreak> prefix_break;
};

// Tokens of the previous turn (its prompt and its reply) that this turn computed again:
// what the engine could have reused, less what it did. 0 for a first turn.
uint64_t recomputed_tokens(uint64_t previous_prompt, uint64_t previous_reply, uint64_t prompt, uint64_t cached);

// `texts`: include the excerpts (the single-turn route); without them for listings.
nlohmann::json to_json(const TurnRecord& t, bool texts);

class TurnLog {
 public:
  // 64 turns of at most ~1.2 KB (a break's four excerpts): under 80 KB a session, and at most
  // ~80 MB for the 1024 sessions kept in memory by default; usually a tenth of that.
  explicit TurnLog(size_t capacity = 64) : capacity_(capacity) {}
  // Numbers the record (n) and keeps it, dropping the oldest beyond capacity.
  const TurnRecord& add(TurnRecord record);
  const TurnRecord* find(uint64_t n) const;
  const TurnRecord* last() const { return turns_.empty() ? nullptr : &turns_.back(); }
  // All kept turns, oldest first, without excerpts.
  nlohmann::json to_json() const;
  // The last `count` turns as {n, prompt_tokens, cached_tokens, prefilled_tokens, cause}.
  nlohmann::json summary(size_t count) const;

 private:
  size_t capacity_;
  uint64_t next_ = 1;
  std::deque<TurnRecord> turns_;
};

}  // namespace kvgate::session
