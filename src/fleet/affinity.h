// Affinity: which conversation a request belongs to, as far as choosing an engine goes, when
// kvgate fronts several engines (fleet.h).
//
// Each engine's gateway recognises its own conversations (session.h): that is where
// isolation is decided. Routing only has to send a request to the engine that most likely
// holds its prefix; a wrong guess costs one prefill, never a wrong answer, because the
// gateway that receives it recognises, or does not, exactly as it would alone.
//
// A request's clues (clues_of):
//   - its name, when it names its conversation (the X-Session-Id header, prompt_cache_key,
//     the `user` field: what the gateway itself accepts as a conversation id);
//   - the previous_response_id of a Responses request;
//   - fingerprints of its messages: a hash of each non-system message's role and content
//     (texts of at least kMinFingerprintBytes; shorter ones, "ok", "continue", recur across
//     conversations). System prompts are left out: they are shared by every conversation of
//     an agent, and would put all of them on one engine.
// Every clue is mixed with the key the request presents, so two tenants' identical messages
// never point at each other's conversations.
//
// AffinityIndex remembers, for the requests an engine answered, which conversation each
// fingerprint belongs to; a later request is that conversation when most of its known
// fingerprints say so. An appending client repeats all earlier messages, a client with a
// sliding window repeats all but the oldest, an edited history repeats most: all are found.
// A client that replaced its whole history with a summary is a new conversation here.
//
// Thread-safety: clues_of is pure; AffinityIndex is not thread-safe (Fleet locks it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "http/http_message.h"

namespace kvgate::gateway {

inline constexpr size_t kMinFingerprintBytes = 24;

struct RequestClues {
  std::string scope;                             // of the key the request presents (a hash)
  std::optional<std::string> name;               // routing key of a named conversation
  std::optional<std::string> previous_response;  // Responses: scope + previous_response_id
  std::vector<uint64_t> fingerprints;            // of its messages, oldest first, no repeats
};

// The clues of a conversation route's request (`body`: its parsed JSON; anything else has
// no clues). `path`: /v1/chat/completions, /v1/messages, /v1/responses or /v1/completions.
RequestClues clues_of(const http::HttpRequest& request, const nlohmann::json& body);

class AffinityIndex {
 public:
  // At most `max_conversations` conversations are remembered (least recently used forgotten),
  // each with its newest `max_fingerprints` fingerprints.
  explicit AffinityIndex(size_t max_conversations = 8192, size_t max_fingerprints = 512)
      : max_conversations_(max_conversations < 1 ? 1 : max_conversations),
        max_fingerprints_(max_fingerprints < 1 ? 1 : max_fingerprints) {}

  // The conversation most of `fingerprints` belong to (ties: the one of the oldest such
  // fingerprint); nullopt when none is known.
  std::optional<std::string> find(const std::vector<uint64_t>& fingerprints) const;
  // Records that `fingerprints` belong to `conversation` (a fingerprint seen before moves to
  // it) and marks it used. Returns the conversations forgotten to stay within the bound.
  std::vector<std::string> record(const std::string& conversation, const std::vector<uint64_t>& fingerprints);
  size_t conversations() const { return entries_.size(); }

 private:
  struct Entry {
    std::list<std::string>::iterator lru;  // position in lru_ (front: most recent)
    std::vector<uint64_t> fingerprints;    // newest last
  };
  void drop_fingerprint(const std::string& conversation, uint64_t fp);

  size_t max_conversations_;
  size_t max_fingerprints_;
  std::list<std::string> lru_;
  std::unordered_map<std::string, Entry> entries_;
  std::unordered_map<uint64_t, std::string> owner_;  // fingerprint → conversation
};

}  // namespace kvgate::gateway
