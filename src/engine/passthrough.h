// Passthrough: the minimal HTTP front of `kvgate up` until src/gateway replaces it. It
// forwards GET/POST/DELETE /v1/* and GET /health to the current engine, adding the engine's
// API key, and relays the answer as it arrives (SSE streams chunk by chunk); a client that
// disconnects cancels the upstream request. No sessions, no compaction, no rewriting.
//
//   - bind() takes the listen address at once: "address in use" is an error naming it,
//     never a silent move to another port (no SO_REUSEPORT).
//   - With an api_key, /v1/* requires `Authorization: Bearer KEY` or `x-api-key: KEY`
//     (constant-time compare); /health stays public.
//   - While no engine is serving (starting, restarting) it answers 503 with Retry-After.
//   - No answer from the engine, or a 5xx, is reported through `on_upstream_failure`
//     (the supervisor then probes the engine at once) and the client gets the engine's
//     status, or 502 when there was none.
//   - Bodies over max_body_bytes get 413.
//
// Thread-safety: start()/stop() from one thread; handlers run on the server's pool and call
// `target` and `on_upstream_failure` concurrently (both must be thread-safe).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "engine/supervisor_deps.h"
#include "util/result.h"

namespace httplib {
class Server;
}

namespace kvgate::engine {

struct PassthroughOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8787;
  std::string api_key;  // empty: no client key required
  size_t max_body_bytes = 64ull << 20;
  Millis upstream_timeout{3600 * 1000};  // per read from the engine
};

class Passthrough {
 public:
  // The engine to forward to, or nullopt with a reason (state) while none serves.
  using Target = std::function<std::optional<EngineEndpoint>(std::string* why_not)>;
  using FailureReport = std::function<void(const std::string& what)>;

  static Result<std::unique_ptr<Passthrough>> bind(PassthroughOptions options, Target target,
                                                   FailureReport on_upstream_failure);
  ~Passthrough();
  Passthrough(const Passthrough&) = delete;
  Passthrough& operator=(const Passthrough&) = delete;

  void start();             // serves on a background thread
  void stop();              // stops accepting, finishes, joins
  std::string url() const;  // http://host:port

 private:
  Passthrough() = default;
  void install_routes();

  PassthroughOptions options_;
  Target target_;
  FailureReport on_failure_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::atomic<bool> ended_{false};  // the accept loop returned
};

// Constant-time equality (for API keys).
bool constant_time_equal(std::string_view a, std::string_view b);

}  // namespace kvgate::engine
