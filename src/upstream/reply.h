// ReplyAccumulator: rebuilds the assistant message and the request's cost from the chunks of
// a streamed chat completion (or takes them from a complete response).
//
// Streamed chunks carry deltas: content and reasoning_content pieces, tool_calls pieces by
// index (id and name once, arguments in pieces), finish_reason, and at the end usage and
// (llama.cpp) timings. The result is what the client saw, used to extend the session's
// chain, and the token figures for metrics.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace kvgate::gateway {

struct Usage {
  uint64_t prompt_tokens = 0;
  uint64_t cached_tokens = 0;
  uint64_t prefilled_tokens = 0;
  uint64_t completion_tokens = 0;
  double prompt_ms = -1;
  double prompt_per_token_ms = -1;
  double predicted_per_second = -1;
  bool known = false;
};

// Reads usage + timings of a response or final chunk (mainline: timings.cache_n/prompt_n;
// ik: usage.prompt_tokens_details.cached_tokens).
Usage usage_from(const nlohmann::json& body);

// The prompt figures of the final event of a native /completion stream. Mainline sends
// timings.cache_n (cached) and timings.prompt_n (prefilled); ik sends tokens_evaluated (the
// whole prompt) and timings.prompt_n (prefilled), and its tokens_cached counts everything in
// the slot, generated tokens included, so it is not used.
struct CompletionFigures {
  uint64_t prompt_tokens = 0;
  uint64_t cached_tokens = 0;
  uint64_t generated_tokens = 0;
  bool known = false;
};
CompletionFigures completion_figures(const nlohmann::json& final_event);

// The prefill progress a stream reports (return_progress): the prompt, its cached part, and
// how much of it is in place (the cached part included).
struct PromptProgress {
  uint64_t total = 0;
  uint64_t cache = 0;
  uint64_t processed = 0;
  bool known = false;
};

class ReplyAccumulator {
 public:
  // One parsed chunk (`data:` payload).
  void add_chunk(const nlohmann::json& chunk);
  // A complete (non-streamed) response.
  void set_response(const nlohmann::json& response);

  nlohmann::json message() const;  // {"role":"assistant","content":...,"tool_calls":[...]}
  bool has_output() const { return has_output_; }
  const std::string& content() const { return content_; }
  const std::string& reasoning() const { return reasoning_; }
  const std::string& finish_reason() const { return finish_reason_; }
  const Usage& usage() const { return usage_; }
  const PromptProgress& prompt_progress() const { return progress_; }  // the last reported
  // The turn's figures when kvgate knows them better than the engine's answer (a rescue).
  void set_usage(const Usage& usage) { usage_ = usage; }
  std::optional<nlohmann::json> error() const { return error_; }
  void set_finish_reason(std::string reason) { finish_reason_ = std::move(reason); }

 private:
  struct Call {
    std::string id, name, arguments;
  };
  std::string content_;
  std::string reasoning_;
  std::map<int64_t, Call> calls_;
  std::string finish_reason_;
  Usage usage_;
  PromptProgress progress_;
  std::optional<nlohmann::json> error_;
  bool has_output_ = false;
};

}  // namespace kvgate::gateway
