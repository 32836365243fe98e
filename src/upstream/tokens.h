// TokenCounter: exact prompt-token counts with the engine's own template and tokenizer,
// without re-tokenising a long conversation every turn.
//
// The engine's tokenizer first splits text at special tokens (<|im_start|>, <|im_end|>, …)
// and tokenises the pieces between them independently, so a prompt's token count is the
// sum over those pieces plus one per special token. count() therefore
//   1. renders the request with the engine's template (POST /apply-template),
//   2. splits the rendered prompt at special tokens (candidates like "<|…|>" are verified
//      once with /tokenize to be single, boundary-splitting tokens),
//   3. looks each piece up by content hash and tokenises (POST /tokenize) only pieces it
//      has not seen — in an ongoing conversation, just the new turn.
// Engine-added tokens (e.g. BOS) are learned by calibrate() from the engine's own
// usage.prompt_tokens for a prompt whose count is known.
//
// Other servers (set_counting):
//   - Counting::kChatTokenize, for vLLM, whose POST /tokenize takes the chat messages
//     themselves ({"model", "messages", "tools", "add_generation_prompt"} → {"count"}) and
//     renders them with the template its chat completions use: count() asks it for the whole
//     prompt (no rendered prompt comes back), count_text() for the text ({"prompt"}), whose
//     counts are kept by content hash like the pieces above.
//   - Counting::kEstimate, for servers that count nothing (no /apply-template, no /tokenize
//     of messages): count() and count_text() return TokenEstimate's bound from the request's
//     size (no engine call, no rendered prompt), learned by learn() from the engine's own
//     counts; before the first answer they return an Error that says so.
//
// Time limit: one count() or count_text() call gives up with an Error once `time_limit`
// has passed (checked before every engine call, and every engine call waits at most what
// is left), so a prompt of many megabytes costs a bounded time, never minutes. The error's
// message starts with kCountTimeLimitMessage (is_count_time_limit() tells it apart).
//
// Thread-safety: all methods may be called concurrently (internally locked; upstream calls
// are made without holding the lock).
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "upstream/token_estimate.h"
#include "upstream/upstream.h"
#include "util/result.h"

namespace kvgate::gateway {

inline constexpr std::string_view kCountTimeLimitMessage = "counting the prompt's tokens took longer than";

// Whether `e` is a count() that passed its time limit (rather than an engine failure).
bool is_count_time_limit(const Error& e);

// How prompts are counted: what the server offers decides.
enum class Counting {
  kRender,        // llama.cpp family: /apply-template, then /tokenize of the pieces
  kChatTokenize,  // vLLM: /tokenize of the chat messages
  kEstimate,      // neither: a bound from the request's size
};
const char* counting_name(Counting c);

struct TokenCount {
  uint64_t tokens = 0;        // what the engine will count for this prompt
  bool estimated = false;     // an upper estimate from the size (estimating), not a count
  std::string prompt;         // the rendered prompt
  size_t pieces = 0;          // text pieces between special tokens
  size_t new_pieces = 0;      // pieces that had to be tokenised now
  uint64_t new_chars = 0;     // bytes sent to /tokenize
  double render_ms = 0;
  double tokenize_ms = 0;
};

class TokenCounter {
 public:
  explicit TokenCounter(Upstream& upstream, size_t max_cached_pieces = 500000,
                        std::chrono::milliseconds time_limit = std::chrono::seconds(30))
      : upstream_(upstream), max_cached_(max_cached_pieces), time_limit_(time_limit) {}

  // The time one count() or count_text() may take; zero or less: the engine calls' own
  // 120 s time-outs only. Call before counting starts.
  void set_time_limit(std::chrono::milliseconds limit) { time_limit_ = limit; }
  std::chrono::milliseconds time_limit() const { return time_limit_; }
  // How to count; `model` is the model named to a kChatTokenize server when the request names
  // none. Call before counting starts.
  void set_counting(Counting how, std::string model = {}) {
    counting_ = how;
    model_ = std::move(model);
  }
  Counting counting() const { return counting_; }
  bool estimating() const { return counting_ == Counting::kEstimate; }
  // The engine counted `engine_tokens` for the request `body` with `messages`: teaches the
  // estimate (estimating only; otherwise nothing).
  void learn(const nlohmann::json& body, const nlohmann::json& messages, uint64_t engine_tokens);

  // `body` is a chat request body (messages, tools, chat_template_kwargs, …); `tools_text`,
  // when not empty, its tools as they are sent (ChatRequest::tools_text: the client's key
  // order, which the engine's template renders as it is).
  Result<TokenCount> count(const nlohmann::json& body, std::string_view tools_text = {});
  // The same for `body` with its messages replaced by `messages` (a view), without copying
  // the body.
  Result<TokenCount> count(const nlohmann::json& body, const nlohmann::json& messages,
                           std::string_view tools_text = {});
  // Tokens of plain text (no template); uses the same piece cache.
  Result<uint64_t> count_text(std::string_view text);
  // Tells the counter what the engine reported for a prompt it counted as `counted`;
  // learns the engine-added offset (BOS etc.). Returns the discrepancy before learning.
  int64_t calibrate(uint64_t counted, uint64_t engine_prompt_tokens);
  int64_t offset() const;

  struct Stats {
    uint64_t counts = 0;
    uint64_t pieces_tokenized = 0;
    uint64_t chars_tokenized = 0;
    uint64_t cache_hits = 0;
    uint64_t mismatches = 0;  // calibrate() saw a difference after the offset was known
    std::optional<double> tokens_per_unit;  // estimating: the learned rate (token_estimate.h)
  };
  Stats stats() const;

 private:
  using Deadline = std::chrono::steady_clock::time_point;
  Result<TokenCount> count_request(const std::string& render_text);  // the /apply-template body
  Deadline deadline() const;
  // How long the next engine call may wait, or the time-limit error.
  Result<std::chrono::milliseconds> remaining(Deadline deadline) const;
  Result<std::vector<int64_t>> tokenize(std::string_view text, Deadline deadline);
  Result<bool> is_splitting_special(const std::string& candidate, Deadline deadline);
  Result<uint64_t> count_pieces(std::string_view prompt, TokenCount& out, Deadline deadline);

  Result<uint64_t> estimate(uint64_t units) const;
  // kChatTokenize: the server's count for a /tokenize body.
  Result<uint64_t> server_count(const std::string& req_text, Deadline deadline);
  Result<TokenCount> count_chat(const nlohmann::json& body, const nlohmann::json& messages,
                                std::string_view tools_text);
  Result<uint64_t> count_chat_text(std::string_view text);
  uint64_t with_offset(uint64_t n) const;  // caller holds mu_

  Upstream& upstream_;
  const size_t max_cached_;
  std::chrono::milliseconds time_limit_;
  Counting counting_ = Counting::kRender;
  std::string model_;
  TokenEstimate estimate_;
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, uint32_t> piece_tokens_;    // guarded by mu_
  std::unordered_map<std::string, bool> specials_;         // guarded by mu_
  std::optional<int64_t> offset_;                          // guarded by mu_
  Stats stats_;                                            // guarded by mu_
};

}  // namespace kvgate::gateway
