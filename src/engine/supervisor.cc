#include "engine/supervisor.h"

#include <algorithm>

#include <fmt/format.h>

#include "engine/health_probe.h"
#include "engine/startup_log.h"
#include "plan/launch_args.h"

namespace kvgate::engine {
namespace {

std::string join(const std::vector<std::string>& items, std::string_view sep) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : std::string(sep)) + i;
  return out;
}

// What the engine's output says about why it failed: its own error lines, else its last
// lines, crash-handler output left out either way (engine/startup_log.h). ik's crash handler
// prints a gdb backtrace after the real error, so the plain tail showed only gdb.
std::string failure_lines(const RunningEngine& engine) {
  std::vector<std::string> lines;
  const std::string tail = engine.log_tail(1000);  // "  | LINE\n" per line
  for (size_t at = 0; at < tail.size();) {
    size_t nl = tail.find('\n', at);
    if (nl == std::string::npos) nl = tail.size();
    std::string_view line(tail.data() + at, nl - at);
    if (line.substr(0, 4) == "  | ") line.remove_prefix(4);
    lines.emplace_back(line);
    at = nl + 1;
  }
  return describe_start_failure(explain_start_failure(lines));
}

}  // namespace

Supervisor::Supervisor(SupervisorConfig config, SupervisorDeps deps)
    : config_(std::move(config)), lifecycle_(config_.restart) {
  if (deps.clock == nullptr) own_clock_ = std::make_unique<SteadyClock>();
  if (deps.launcher == nullptr) own_launcher_ = std::make_unique<ServerProcessLauncher>();
  if (deps.prober == nullptr) own_prober_ = std::make_unique<HttpEngineProber>();
  clock_ = deps.clock ? deps.clock : own_clock_.get();
  launcher_ = deps.launcher ? deps.launcher : own_launcher_.get();
  prober_ = deps.prober ? deps.prober : own_prober_.get();
}

Supervisor::~Supervisor() { stop(); }

void Supervisor::add_listener(std::function<void(const Transition&, const SupervisorStatus&)> listener) {
  listeners_.push_back(std::move(listener));
}

void Supervisor::start() {
  if (started_.exchange(true)) return;
  owner_ = std::thread([this] { run(); });
}

void Supervisor::request_stop() {
  std::lock_guard lock(mu_);
  stop_requested_ = true;
  wake_.notify_all();
}

void Supervisor::stop() {
  request_stop();
  if (owner_.joinable()) owner_.join();
}

SupervisorStatus Supervisor::status() const {
  std::lock_guard lock(mu_);
  return status_;
}

SupervisorStatus Supervisor::wait_until(const std::function<bool(const SupervisorStatus&)>& done,
                                        Millis timeout) const {
  std::unique_lock lock(mu_);
  changed_.wait_for(lock, timeout, [&] { return done(status_); });
  return status_;
}

void Supervisor::report_upstream_failure(const std::string& what) {
  std::lock_guard lock(mu_);
  if (!is_serving(status_.state)) return;  // starting or restarting already: nothing to probe
  if (!probe_now_) probe_reason_ = what;
  probe_now_ = true;
  wake_.notify_all();
}

void Supervisor::report_requests_failing(const std::string& what) {
  std::lock_guard lock(mu_);
  if (!is_serving(status_.state)) return;
  probe_completion_ = true;
  if (!probe_now_) probe_reason_ = what;
  probe_now_ = true;
  wake_.notify_all();
}

std::string Supervisor::engine_log_tail(size_t lines) const {
  std::lock_guard lock(engine_mu_);
  return engine_ ? engine_->log_tail(lines) : std::string();
}

bool Supervisor::stop_requested() {
  std::lock_guard lock(mu_);
  return stop_requested_;
}

void Supervisor::sleep_until(SteadyTime deadline) {
  std::unique_lock lock(mu_);
  if (stop_requested_ || probe_now_) return;
  clock_->wait_until(lock, wake_, deadline);
}

void Supervisor::event_line(const std::string& line, bool console) {
  if (config_.log) config_.log->write_line("kvgate: " + line);
  if (console && config_.on_event) config_.on_event(line);
}

void Supervisor::on_engine_line(std::string_view line) {
  if (config_.log) config_.log->write_line(line);
  std::lock_guard lock(verifier_mu_);
  if (verifier_) verifier_->on_line(line);
}

void Supervisor::fire(Event event, const std::string& cause) {
  auto t = lifecycle_.on(event, cause, clock_->now());
  if (!t) return;
  event_line(fmt::format("engine {} -> {}: {}", state_name(t->from), state_name(t->to), t->cause));
  // Listeners see the transition before waiters do: whoever wakes on the new state knows
  // every listener has run.
  SupervisorStatus next = status();
  next.state = t->to;
  next.cause = t->cause;
  next.restarts = lifecycle_.restarts();
  if (t->to == State::kReady && t->from == State::kVerifying) {
    next.last_start = std::chrono::duration_cast<Millis>(t->at - started_at_);
  }
  for (const auto& l : listeners_) l(*t, next);
  std::lock_guard lock(mu_);
  status_.state = next.state;
  status_.cause = next.cause;
  status_.restarts = next.restarts;
  status_.last_start = next.last_start;
  if (!is_serving(t->to)) {
    probe_now_ = false;
    probe_completion_ = false;  // a new engine starts trusted
  }
  changed_.notify_all();
}

void Supervisor::run() {
  while (!is_terminal(lifecycle_.state())) {
    switch (lifecycle_.state()) {
      case State::kStarting:
        run_starting();
        break;
      case State::kVerifying:
        run_verifying();
        break;
      case State::kReady:
      case State::kDegraded:
        run_serving();
        break;
      case State::kRestarting:
        run_restarting();
        break;
      case State::kStopped:
      case State::kFailed:
        break;
    }
  }
  stop_engine(lifecycle_.state() == State::kFailed ? "failed" : "stop requested");
  std::lock_guard lock(mu_);
  changed_.notify_all();
}

void Supervisor::stop_engine(const char* why) {
  if (!engine_) return;
  const pid_t pid = engine_->pid();
  const util::ExitStatus st = engine_->stop(config_.timing.stop_grace);
  event_line(fmt::format("engine pid {} stopped ({}): {}", pid, why, st.describe()));
  {
    std::lock_guard lock(verifier_mu_);
    verifier_.reset();
  }
  {
    std::lock_guard lock(engine_mu_);
    engine_.reset();
  }
  std::lock_guard lock(mu_);
  status_.pid = 0;
  status_.endpoint.reset();
  changed_.notify_all();
}

void Supervisor::run_starting() {
  started_at_ = clock_->now();
  {
    std::lock_guard lock(verifier_mu_);
    verifier_ = config_.verifier ? config_.verifier() : nullptr;
  }
  auto launched = launcher_->launch(config_.launch, [this](std::string_view l) { on_engine_line(l); });
  uint64_t generation = 0;
  {
    std::lock_guard lock(mu_);
    generation = ++status_.generation;
  }
  if (!launched) return fire(Event::kStartFailed, "cannot start the engine: " + launched.error().message());
  {
    std::lock_guard lock(engine_mu_);
    engine_ = std::move(*launched);
  }
  const EngineEndpoint ep = engine_->endpoint();
  {
    std::lock_guard lock(mu_);
    status_.pid = engine_->pid();
    status_.endpoint = ep;
    changed_.notify_all();
  }
  std::vector<std::string> argv{config_.launch.binary.string()};
  argv.insert(argv.end(), config_.launch.args.begin(), config_.launch.args.end());
  event_line(fmt::format("engine start #{}: pid {} on {}: {}", generation, engine_->pid(), ep.base_url(),
                         plan::redacted_command_line(argv)));

  const SteadyTime deadline = started_at_ + config_.timing.start_timeout;
  std::string last = "no answer yet";
  for (;;) {
    if (stop_requested()) return fire(Event::kStopRequested, "stop requested");
    if (!engine_->running()) {
      const auto st = engine_->exit_status();
      return fire(Event::kStartFailed, fmt::format("the engine {} during startup{}", st ? st->describe() : "exited",
                                                   failure_lines(*engine_)));
    }
    const CheckResult health = prober_->health(ep, std::min(config_.timing.probe_timeout, Millis(2000)));
    if (health.ok) {
      return fire(Event::kHealthy,
                  fmt::format("/health answered 200 after {} ms",
                              std::chrono::duration_cast<Millis>(clock_->now() - started_at_).count()));
    }
    last = health.detail;
    if (clock_->now() >= deadline) {
      return fire(Event::kStartFailed,
                  fmt::format("no GET /health 200 within {} ms (last: {}){}", config_.timing.start_timeout.count(),
                              last, failure_lines(*engine_)));
    }
    sleep_until(std::min(deadline, clock_->now() + config_.timing.poll));
  }
}

void Supervisor::run_verifying() {
  const EngineEndpoint ep = engine_->endpoint();
  const SteadyTime deadline = clock_->now() + config_.timing.ready_timeout;
  for (;;) {
    if (stop_requested()) return fire(Event::kStopRequested, "stop requested");
    const auto remaining = std::chrono::duration_cast<Millis>(deadline - clock_->now());
    const CheckResult done = prober_->completion(ep, std::max(remaining, Millis(1)));
    if (done.ok) break;
    if (!engine_->running()) {
      const auto st = engine_->exit_status();
      return fire(Event::kStartFailed,
                  fmt::format("the engine {} before completing a token{}", st ? st->describe() : "exited",
                              failure_lines(*engine_)));
    }
    if (clock_->now() >= deadline) {
      return fire(Event::kStartFailed, fmt::format("no successful 1-token completion within {} ms: {}",
                                                   config_.timing.ready_timeout.count(), done.detail));
    }
    sleep_until(std::min(deadline, clock_->now() + config_.timing.poll));
  }
  // The completion came after the startup log; the verifier has seen every startup line.
  std::optional<VerificationReport> report;
  {
    std::lock_guard lock(verifier_mu_);
    if (verifier_) report = verifier_->finish();
    verifier_.reset();
  }
  {
    std::lock_guard lock(mu_);
    status_.verification = report;
  }
  if (report) {
    // The details go to the log; the transition's cause summarises them.
    for (const auto& v : report->verified) event_line("verified: " + v, false);
    for (const auto& w : report->warnings) event_line("warning: " + w, false);
    for (const auto& f : report->findings) event_line("MISMATCH: " + f, false);
  }
  if (report && !report->passed()) {
    if (config_.on_mismatch == OnMismatch::kFail) {
      return fire(Event::kMismatch, fmt::format("startup verification failed ({}): {}", report->checker,
                                                join(report->findings, "; ")));
    }
  }
  next_probe_ = clock_->now() + config_.timing.health_interval;
  const bool warned = report && !report->passed();
  fire(Event::kVerified,
       fmt::format(
           "a 1-token completion worked{}",
           !report  ? "; nothing to verify the log against"
           : warned ? fmt::format("; {} verification finding(s), --on-mismatch warn", report->findings.size())
                    : fmt::format("; the startup log matched ({})", report->checker)));
}

void Supervisor::run_serving() {
  const EngineEndpoint ep = engine_->endpoint();
  for (;;) {
    if (stop_requested()) return fire(Event::kStopRequested, "stop requested");
    if (!engine_->running()) {
      const auto st = engine_->exit_status();
      return fire(Event::kExited, fmt::format("{}{}", st ? st->describe() : "exited", failure_lines(*engine_)));
    }
    std::string reason;
    bool now_requested = false;
    bool completion = false;
    {
      std::lock_guard lock(mu_);
      now_requested = probe_now_;
      reason = probe_reason_;
      completion = probe_completion_;
      probe_now_ = false;
    }
    if (now_requested || clock_->now() >= next_probe_) {
      const CheckResult r = completion ? prober_->completion(ep, config_.timing.probe_timeout)
                                       : prober_->deep(ep, config_.timing.probe_timeout);
      next_probe_ = clock_->now() + config_.timing.health_interval;
      if (!engine_->running()) continue;  // it died during the probe: report the exit
      if (r.ok && completion) {
        std::lock_guard lock(mu_);
        probe_completion_ = false;
      }
      if (r.ok) return fire(Event::kProbeOk, "");
      return fire(
          Event::kProbeFailed,
          now_requested ? fmt::format("{} (probed after the proxy saw: {})", r.detail, reason) : r.detail);
    }
    sleep_until(std::min(next_probe_, clock_->now() + config_.timing.poll));
  }
}

void Supervisor::run_restarting() {
  stop_engine("restart");
  const SteadyTime at = lifecycle_.restart_at();
  for (;;) {
    if (stop_requested()) return fire(Event::kStopRequested, "stop requested");
    if (clock_->now() >= at) return fire(Event::kBackoffElapsed, "backoff elapsed");
    sleep_until(at);
  }
}

}  // namespace kvgate::engine
