// TurnDriver: a real Gateway (gateway/gateway.h) in front of a ScriptedUpstream, driven
// request by request the way clients send them: each request goes through the whole chat
// turn (head checks, parsing, recognition, intake, compaction, the send) and the driver
// returns the messages the turn sent upstream. For the isolation property test and the
// recognition fuzz target on the turn's own code.
//
// Keys "k1" and "k2" are configured (their scopes are session::scope_of_key of them); one
// slot, sessions in memory. Not thread-safe (one per test).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "testing/client_families.h"

namespace kvgate::gateway {
class Gateway;
}

namespace kvgate::testing {

class ScriptedUpstream;

struct TurnDriverOptions {
  size_t max_sessions = 1024;
  // The high watermark in tokens (the fake tokenizer's: about a byte a token); 0: no
  // compaction. Compactions truncate and drop (L1, L3): summaries need an engine that writes
  // them from the conversation (MiniGateway's property test covers those).
  uint64_t high_tokens = 0;
};

class TurnDriver {
 public:
  explicit TurnDriver(TurnDriverOptions options = {});
  ~TurnDriver();

  // POST /v1/chat/completions with `key` and, when given, X-Session-Id `id`; the engine
  // answers with `reply`'s content and tool calls (an assistant message; a plain reply of
  // its own when the content is empty or not text). The view is null when nothing was sent
  // upstream (`status` says why).
  struct Result {
    int status = 0;
    SentView sent;
    nlohmann::json reply;  // the answer's message as the client received it (200), else null
  };
  Result send(const std::string& key, const std::optional<std::string>& id, const nlohmann::json& messages,
              const nlohmann::json& reply);

  // `messages` as the turn's first step leaves them (the body parsed, repaired, validated and
  // stabilised with this gateway's options: gateway/turn_request.h): what recognition and
  // intake work from, so what the isolation oracle judges a view against when a client sends
  // what the turn repairs. nullopt when that step refuses them.
  std::optional<nlohmann::json> prepared(const nlohmann::json& messages);

  gateway::Gateway& gateway() { return *gateway_; }

 private:
  std::shared_ptr<ScriptedUpstream> upstream_;
  std::unique_ptr<gateway::Gateway> gateway_;
};

}  // namespace kvgate::testing
