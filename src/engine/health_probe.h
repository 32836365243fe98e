// HttpEngineProber: the supervisor's HTTP checks against a llama-server (mainline or ik).
//
//   health      GET /health                          200 = the HTTP thread answers
//   deep        GET /slots (through the task queue)  200 = the engine's loop answers; a
//               404/501 (slots endpoint disabled) falls back to `completion`
//   completion  POST /v1/completions, 1 token          200 with choices = it really generates
//
// Mainline answers /health without touching its task queue, so /health stays 200 when the
// decode loop is wedged (server_behaviour.md §1.5, §5): only `deep` catches that zombie.
// Every request carries the engine's API key and its own time-out; nothing is retried here.
//
// Thread-safety: stateless; any thread.
#pragma once

#include "engine/supervisor_deps.h"

namespace kvgate::engine {

class HttpEngineProber final : public EngineProber {
 public:
  CheckResult health(const EngineEndpoint& ep, Millis timeout) override;
  CheckResult deep(const EngineEndpoint& ep, Millis timeout) override;
  CheckResult completion(const EngineEndpoint& ep, Millis timeout) override;
};

}  // namespace kvgate::engine
