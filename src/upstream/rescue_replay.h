// Helpers for recovering the raw text of a generation the engine rejected (docs/RESCUE.md).
//
// When llama-server cannot parse its own output it answers 500 and the text is lost. The
// gateway replays the request's rendered prompt (POST /apply-template with the same chat body)
// as a streamed raw completion with the same seed and sampling settings, collects the text and
// hands it to parse_tool_calls(). These functions build that request and read its stream; the
// HTTP calls stay in the gateway. All but replay_seed() are pure; none throws.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace kvgate::gateway {

// Whether an engine error is the output parser rejecting the generation, or the engine
// failing to encode it (engine_errors.h: kOutput).
bool is_output_parse_error(int status, std::string_view message);

// The /completion body that replays `chat_body`'s generation: `prompt` (from
// /apply-template), streamed, with every sampling field of the chat body carried over
// (seed, temperature, top_p, penalties, logit_bias, stop, id_slot, ...) and max_tokens /
// max_completion_tokens as n_predict, response_format as json_schema. Chat-only fields
// (messages, tools, chat_template_kwargs, ...) are left out; so is the lazy grammar the engine
// derives from `tools` (it is not exposed), so text after a triggered call marker may differ.
// The replay reproduces the original text only when the chat body had an explicit seed.
// A raw completion's body (POST /v1/completions) replays the same way with its own `prompt` (a
// text or token ids).
nlohmann::json replay_completion_body(const nlohmann::json& chat_body, const nlohmann::json& prompt);

// A seed for a request that named none, so that a rejected generation can be replayed
// faithfully. A counter (thread-safe), not a function of the request.
uint32_t replay_seed();

// Accumulates a /completion SSE stream: feed each event's data payload (the text after
// "data: "); the text is the concatenation of the events' `content`. An error event (the
// engine failing on malformed UTF-8 after streaming what came before) ends the text and is
// remembered. `stopped_by_limit` is true when the final event says the length limit was hit.
// The prompt's figures come from the prefill's progress events, then from the final event.
class ReplayText {
 public:
  void add_event(std::string_view data);

  const std::string& text() const { return text_; }
  bool failed() const { return failed_; }
  bool finished() const { return finished_; }
  bool stopped_by_limit() const { return stopped_by_limit_; }
  int tokens_predicted() const { return tokens_predicted_; }
  int tokens_evaluated() const { return tokens_evaluated_; }
  int tokens_cached() const { return tokens_cached_; }  // of the prompt, from the engine's cache
  int tokens_computed() const { return tokens_computed_; }  // of the prompt, computed for the replay

 private:
  std::string text_;
  bool failed_ = false;
  bool finished_ = false;
  bool stopped_by_limit_ = false;
  int tokens_predicted_ = 0;
  int tokens_evaluated_ = 0;
  int tokens_cached_ = 0;
  int tokens_computed_ = 0;
};

}  // namespace kvgate::gateway
