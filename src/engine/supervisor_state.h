// The supervisor's state machine, as a pure value: events in, transitions out. It decides
// what a supervised engine's state becomes and when a restart may begin; the owner thread
// (engine/supervisor.h) performs the side effects (spawn, probe, kill) and feeds back
// what it observed.
//
//                 healthy           verified
//   starting ──────────────► verifying ───────► ready ◄────────┐ probe ok
//      ▲  │ start failed         │ mismatch      │  │ probe    │
//      │  │ (first start:        ▼ (--on-mismatch│  │ failed   │
//      │  │  failed)           failed    fail)   │  ▼          │
//      │  └──────────────┐                 exited│ degraded ───┘
//      │ backoff elapsed ▼                       │  │ zombie_after probes failed in a row,
//   restarting ◄─────────────────────────────────┴──┘ or exited
//      │ max_failed_starts starts in a row never got ready
//      ▼
//   failed            stop requested (any state but stopped/failed) → stopped
//
// Restart delay: backoff_initial × 2^k, capped at backoff_max; k counts restarts since the
// engine last stayed ready for backoff_reset_after. A start that fails before the engine was
// ever ready is final unless retry_first_start (a wrong model path does not heal).
//
// Thread-safety: none; one owner.
#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace kvgate::engine {

using SteadyTime = std::chrono::steady_clock::time_point;
using Millis = std::chrono::milliseconds;

enum class State { kStarting, kVerifying, kReady, kDegraded, kRestarting, kStopped, kFailed };
const char* state_name(State state);
inline bool is_terminal(State s) { return s == State::kStopped || s == State::kFailed; }
// Ready or degraded: an engine is up and serving (degraded: its deep probe just failed).
inline bool is_serving(State s) { return s == State::kReady || s == State::kDegraded; }

enum class Event {
  kHealthy,         // starting: GET /health answered 200
  kStartFailed,     // starting/verifying: spawn failed, exited, deadline passed, completion failed
  kVerified,        // verifying: log verification passed (or warned) and a 1-token completion worked
  kMismatch,        // verifying: the log contradicts the plan, under --on-mismatch fail
  kProbeOk,         // ready/degraded: the deep probe answered in time
  kProbeFailed,     // ready/degraded: the deep probe timed out, failed or got a 5xx
  kExited,          // ready/degraded: the engine process exited
  kBackoffElapsed,  // restarting: the delay is over
  kStopRequested,
};
const char* event_name(Event event);

struct RestartPolicy {
  int zombie_after = 3;  // consecutive failed deep probes that make a live engine a zombie
  Millis backoff_initial{1000};
  Millis backoff_max{60000};
  Millis backoff_reset_after{300000};
  int max_failed_starts = 5;  // 0: never give up
  bool retry_first_start = false;
};

struct Transition {
  State from;
  State to;
  Event event;
  std::string cause;
  SteadyTime at;
};

class Lifecycle {
 public:
  explicit Lifecycle(RestartPolicy policy) : policy_(policy) {}

  State state() const { return state_; }
  // Applies `event` observed at `now`. Returns the transition when the state changes;
  // nullopt for events that change nothing (a probe that succeeds while ready) or do not
  // apply to the current state (they are ignored).
  std::optional<Transition> on(Event event, const std::string& cause, SteadyTime now);

  // REQUIRES: state() == kRestarting. When the next start may begin.
  SteadyTime restart_at() const { return restart_at_; }
  Millis last_backoff() const { return last_backoff_; }
  int restarts() const { return restarts_; }
  int failed_starts_in_row() const { return failed_starts_; }
  int probe_failures_in_row() const { return probe_failures_; }
  bool ever_ready() const { return ever_ready_; }

 private:
  Transition move(State to, Event event, std::string cause, SteadyTime now);
  Transition restart(Event event, std::string cause, SteadyTime now, bool after_serving);

  RestartPolicy policy_;
  State state_ = State::kStarting;
  bool ever_ready_ = false;
  int failed_starts_ = 0;
  int probe_failures_ = 0;
  int restarts_ = 0;
  int backoff_step_ = 0;
  SteadyTime ready_since_{};
  SteadyTime restart_at_{};
  Millis last_backoff_{0};
};

}  // namespace kvgate::engine
