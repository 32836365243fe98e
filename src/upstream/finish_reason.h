// ik_llama.cpp answers finish_reason "stop" when max_tokens cut the reply short, where
// mainline (and the OpenAI API) say "length"; clients that continue a reply on "length" then
// take a truncated answer as complete. FinishReasonFix rewrites it where the build has that
// quirk (plan::says_stop_at_max_tokens) and the reply's completion tokens reached the limit
// the request set (max_tokens, max_completion_tokens or n_predict). A reply that ended on
// its own exactly at the limit is indistinguishable and reported as "length" too.
//
// Streamed, the finish chunk comes before the usage that says how many tokens were generated
// (when the engine was asked for usage): the finish chunk is held until the next event.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kvgate::gateway {

// A streamed chunk on its way to the client: as the engine sent it (`raw`, its event text),
// or rewritten by kvgate (`raw` empty: the chunk is to be written anew).
struct RelayChunk {
  nlohmann::json chunk;
  std::string raw;
};

class FinishReasonFix {
 public:
  // `active`: the engine has the quirk. `request`: the chat body sent to the engine.
  FinishReasonFix(bool active, const nlohmann::json& request);

  // A complete response: fixed in place.
  void fix_response(nlohmann::json& response);
  // One streamed chunk (parsed) and its raw event text, and whether it is itself relayed
  // (`forward`: a usage chunk the client did not ask for still releases a held finish chunk):
  // returns the chunks to relay now, in order (none while a finish chunk is held).
  std::vector<RelayChunk> on_chunk(nlohmann::json chunk, std::string raw, bool forward);
  // The end of the stream: whatever is still held.
  std::vector<RelayChunk> flush();
  // True once a "stop" was rewritten to "length".
  bool rewrote() const { return rewrote_; }

 private:
  bool cut(const nlohmann::json& with_counts) const;
  static RelayChunk rewrite(nlohmann::json chunk);
  uint64_t limit_ = 0;  // 0: the request set none (nothing to fix)
  std::optional<RelayChunk> held_;
  bool rewrote_ = false;
};

}  // namespace kvgate::gateway
