// Supervisor: keeps one llama-server running, verified and healthy.
//
// One owner thread runs the state machine of engine/supervisor_state.h and performs every
// side effect: it spawns the engine (LaunchSpec: the probed build's argv), waits for
// GET /health while watching for an early exit, feeds the engine's output lines to a
// LiveVerifier and to a size-rotated log as they arrive, proves readiness with a real
// 1-token completion, then probes the engine through its task queue every health_interval.
// A crash restarts it after a backoff; a live process whose deep probes keep failing is a
// zombie and is killed and restarted; every transition is logged with its cause.
// Stop = SIGTERM (and SIGCONT) to the engine's process group, SIGKILL after stop_grace.
//
// No orphans: the engine is spawned from the owner thread with a parent-death signal, so it
// dies with kvgate even under SIGKILL; the owner thread outlives every engine it starts.
//
// Integration (the gateway): read status() per request (state, endpoint with the engine's
// URL and API key, generation), add_listener() for transitions (a new generation means the
// engine's KV cache and slots are gone), report_upstream_failure() when the engine answers
// 5xx or cannot be reached (an immediate deep probe follows), report_requests_failing() when
// it keeps failing requests although it answers: the deep probe (/slots) cannot see that,
// so probes are real 1-token completions until one succeeds, and zombie_after failures in a
// row restart it.
//
// Thread-safety: all public methods may be called from any thread except where noted.
// Locking: mu_ guards status_ and the request flags and pairs with wake_/changed_;
// engine_mu_ guards replacing engine_ (only the owner replaces it; other threads lock it to
// read the engine's log tail); verifier_mu_ serialises the verifier's calls. Listeners run
// on the owner thread with no lock held.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/live_verifier.h"
#include "engine/rotating_log.h"
#include "engine/supervisor_deps.h"
#include "engine/supervisor_state.h"

namespace kvgate::engine {

struct SupervisorTiming {
  Millis start_timeout{300000};   // spawn → GET /health 200 (model load)
  Millis ready_timeout{120000};   // /health 200 → a successful 1-token completion
  Millis health_interval{10000};  // between deep probes
  Millis probe_timeout{5000};     // one deep probe
  Millis stop_grace{10000};       // SIGTERM → SIGKILL
  Millis poll{200};               // how often exit and /health are checked
};

struct SupervisorConfig {
  LaunchSpec launch;
  RestartPolicy restart;
  SupervisorTiming timing;
  OnMismatch on_mismatch = OnMismatch::kFail;
  VerifierFactory verifier;          // empty: nothing is verified
  std::shared_ptr<RotatingLog> log;  // engine output + "kvgate:" event lines; may be null
  // One line per event (transitions, starts, stops; e.g. to stderr); may be empty.
  std::function<void(std::string_view)> on_event;
};

struct SupervisorStatus {
  State state = State::kStarting;
  uint64_t generation = 0;  // engine starts so far: a new value means a new process
  int restarts = 0;
  pid_t pid = 0;  // 0 while no engine process exists
  std::optional<EngineEndpoint> endpoint;
  std::string cause;                               // of the last transition
  std::optional<VerificationReport> verification;  // of the last start that reached it
  Millis last_start{0};                            // spawn → ready, of the last successful start
};

// Null members: the production implementations. Not owned; must outlive the Supervisor.
struct SupervisorDeps {
  Clock* clock = nullptr;
  EngineLauncher* launcher = nullptr;
  EngineProber* prober = nullptr;
};

class Supervisor {
 public:
  explicit Supervisor(SupervisorConfig config, SupervisorDeps deps = {});
  ~Supervisor();  // stop()
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // REQUIRES: before start(). Called on the owner thread after every transition; must not
  // block or call stop().
  void add_listener(std::function<void(const Transition&, const SupervisorStatus&)> listener);

  // Starts the owner thread (the first engine start). REQUIRES: called once.
  void start();
  // Asks the owner to stop the engine and end; returns at once.
  void request_stop();
  // request_stop() and waits until the engine is stopped. Idempotent.
  void stop();

  SupervisorStatus status() const;
  // Waits (real time) until `done(status())` holds or `timeout` passes; returns the last status.
  SupervisorStatus wait_until(const std::function<bool(const SupervisorStatus&)>& done, Millis timeout) const;
  // The engine answered 5xx or could not be reached: probe it now instead of at the next interval.
  void report_upstream_failure(const std::string& what);
  // The engine failed several requests in a row with unexplained 5xx answers: probe with a
  // real completion (now, and at every interval) until one succeeds.
  void report_requests_failing(const std::string& what);
  // The current engine's last output lines ("" when none runs).
  std::string engine_log_tail(size_t lines) const;

 private:
  void run();
  void run_starting();
  void run_verifying();
  void run_serving();
  void run_restarting();
  void stop_engine(const char* why);
  void fire(Event event, const std::string& cause);
  // To the log, and to on_event when `console`.
  void event_line(const std::string& line, bool console = true);
  bool stop_requested();
  void sleep_until(SteadyTime deadline);
  void on_engine_line(std::string_view line);

  const SupervisorConfig config_;
  Clock* clock_;
  EngineLauncher* launcher_;
  EngineProber* prober_;
  std::unique_ptr<Clock> own_clock_;
  std::unique_ptr<EngineLauncher> own_launcher_;
  std::unique_ptr<EngineProber> own_prober_;
  std::vector<std::function<void(const Transition&, const SupervisorStatus&)>> listeners_;

  // Owner-thread state.
  Lifecycle lifecycle_;
  SteadyTime started_at_{};
  SteadyTime next_probe_{};

  mutable std::mutex mu_;
  std::condition_variable wake_;             // wakes the owner (stop, upstream failure)
  mutable std::condition_variable changed_;  // status_ changed
  SupervisorStatus status_;                  // guarded by mu_
  bool stop_requested_ = false;              // guarded by mu_
  bool probe_now_ = false;                   // guarded by mu_
  bool probe_completion_ = false;            // guarded by mu_; probes are real completions
  std::string probe_reason_;                 // guarded by mu_

  mutable std::mutex engine_mu_;
  std::unique_ptr<RunningEngine> engine_;  // written by the owner under engine_mu_

  std::mutex verifier_mu_;
  std::unique_ptr<LiveVerifier> verifier_;  // guarded by verifier_mu_

  std::thread owner_;
  std::atomic<bool> started_{false};
};

}  // namespace kvgate::engine
