#include "engine/supervisor_state.h"

#include <algorithm>

#include <fmt/format.h>

namespace kvgate::engine {

const char* state_name(State state) {
  switch (state) {
    case State::kStarting:
      return "starting";
    case State::kVerifying:
      return "verifying";
    case State::kReady:
      return "ready";
    case State::kDegraded:
      return "degraded";
    case State::kRestarting:
      return "restarting";
    case State::kStopped:
      return "stopped";
    case State::kFailed:
      return "failed";
  }
  return "?";
}

const char* event_name(Event event) {
  switch (event) {
    case Event::kHealthy:
      return "healthy";
    case Event::kStartFailed:
      return "start-failed";
    case Event::kVerified:
      return "verified";
    case Event::kMismatch:
      return "mismatch";
    case Event::kProbeOk:
      return "probe-ok";
    case Event::kProbeFailed:
      return "probe-failed";
    case Event::kExited:
      return "exited";
    case Event::kBackoffElapsed:
      return "backoff-elapsed";
    case Event::kStopRequested:
      return "stop-requested";
  }
  return "?";
}

Transition Lifecycle::move(State to, Event event, std::string cause, SteadyTime now) {
  Transition t{state_, to, event, std::move(cause), now};
  state_ = to;
  return t;
}

Transition Lifecycle::restart(Event event, std::string cause, SteadyTime now, bool after_serving) {
  // A long healthy run earns a fresh backoff; a crash loop keeps doubling it.
  if (after_serving && now - ready_since_ >= policy_.backoff_reset_after) backoff_step_ = 0;
  Millis delay = policy_.backoff_initial;
  for (int i = 0; i < backoff_step_ && delay < policy_.backoff_max; ++i) delay *= 2;
  delay = std::min(delay, policy_.backoff_max);
  ++backoff_step_;
  ++restarts_;
  last_backoff_ = delay;
  restart_at_ = now + delay;
  probe_failures_ = 0;
  return move(State::kRestarting, event,
              fmt::format("{}; restart #{} in {} ms", cause, restarts_, delay.count()), now);
}

std::optional<Transition> Lifecycle::on(Event event, const std::string& cause, SteadyTime now) {
  if (is_terminal(state_)) return std::nullopt;
  if (event == Event::kStopRequested) return move(State::kStopped, event, cause, now);
  switch (state_) {
    case State::kStarting:
    case State::kVerifying:
      if (event == Event::kHealthy && state_ == State::kStarting)
        return move(State::kVerifying, event, cause, now);
      if (event == Event::kVerified && state_ == State::kVerifying) {
        ever_ready_ = true;
        failed_starts_ = 0;
        probe_failures_ = 0;
        ready_since_ = now;
        return move(State::kReady, event, cause, now);
      }
      if (event == Event::kMismatch && state_ == State::kVerifying)
        return move(State::kFailed, event, cause, now);
      if (event == Event::kStartFailed || event == Event::kExited) {
        ++failed_starts_;
        if (!ever_ready_ && !policy_.retry_first_start) {
          return move(State::kFailed, event, "the first start failed: " + cause, now);
        }
        if (policy_.max_failed_starts > 0 && failed_starts_ >= policy_.max_failed_starts) {
          return move(State::kFailed, event,
                      fmt::format("{} starts in a row failed; the last: {}", failed_starts_, cause), now);
        }
        return restart(event, "start failed: " + cause, now, false);
      }
      return std::nullopt;
    case State::kReady:
    case State::kDegraded:
      if (event == Event::kExited) return restart(event, "engine exited: " + cause, now, true);
      if (event == Event::kProbeOk) {
        probe_failures_ = 0;
        if (state_ == State::kDegraded) return move(State::kReady, event, "deep probe answered again", now);
        return std::nullopt;
      }
      if (event == Event::kProbeFailed) {
        ++probe_failures_;
        if (probe_failures_ >= policy_.zombie_after) {
          return restart(
              event,
              fmt::format("zombie: {} deep probes in a row failed while the process is alive; last: {}",
                          probe_failures_, cause),
              now, true);
        }
        if (state_ == State::kReady) return move(State::kDegraded, event, "deep probe failed: " + cause, now);
        return std::nullopt;
      }
      return std::nullopt;
    case State::kRestarting:
      if (event == Event::kBackoffElapsed) return move(State::kStarting, event, cause, now);
      return std::nullopt;
    case State::kStopped:
    case State::kFailed:
      return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace kvgate::engine
