// The supervisor's owner loop against a fake clock (virtual time: every wait returns at its
// deadline), a fake launcher and a fake prober. The real engine is exercised by
// supervisor_e2e_test.cc.
#include "engine/supervisor.h"

#include <atomic>
#include <thread>

#include <gtest/gtest.h>

namespace kvgate::engine {
namespace {

using std::chrono::milliseconds;

class FakeClock final : public Clock {
 public:
  SteadyTime now() override { return SteadyTime() + milliseconds(ms_.load()); }
  void wait_until(std::unique_lock<std::mutex>&, std::condition_variable&, SteadyTime deadline) override {
    const auto target = std::chrono::duration_cast<milliseconds>(deadline - SteadyTime()).count();
    int64_t cur = ms_.load();
    while (target > cur && !ms_.compare_exchange_weak(cur, target)) {
    }
  }

 private:
  std::atomic<int64_t> ms_{1000000};
};

struct FakeProcess {
  std::atomic<bool> running{true};
  std::atomic<int> stops{0};
};

class FakeEngine final : public RunningEngine {
 public:
  FakeEngine(std::shared_ptr<FakeProcess> p, pid_t pid) : p_(std::move(p)), pid_(pid) {}
  pid_t pid() const override { return pid_; }
  EngineEndpoint endpoint() const override {
    return {"127.0.0.1", static_cast<uint16_t>(40000 + pid_), "key"};
  }
  bool running() override { return p_->running; }
  std::optional<util::ExitStatus> exit_status() override {
    if (p_->running) return std::nullopt;
    return util::ExitStatus{0, 9};
  }
  util::ExitStatus stop(Millis) override {
    ++p_->stops;
    p_->running = false;
    return {0, 15};
  }
  std::string log_tail(size_t) const override { return "  | fake engine output\n"; }

 private:
  std::shared_ptr<FakeProcess> p_;
  pid_t pid_;
};

class FakeLauncher final : public EngineLauncher {
 public:
  Result<std::unique_ptr<RunningEngine>> launch(const LaunchSpec&,
                                                std::function<void(std::string_view)> on_line) override {
    std::lock_guard lock(mu);
    if (fail_launch) return Error("exec failed");
    auto p = std::make_shared<FakeProcess>();
    if (die_at_start) p->running = false;
    processes.push_back(p);
    for (const auto& l : lines) on_line(l);
    return std::unique_ptr<RunningEngine>(new FakeEngine(p, static_cast<pid_t>(processes.size())));
  }
  std::shared_ptr<FakeProcess> process(size_t i) {
    std::lock_guard lock(mu);
    return i < processes.size() ? processes[i] : nullptr;
  }

  std::mutex mu;
  std::vector<std::shared_ptr<FakeProcess>> processes;
  std::vector<std::string> lines{"load_tensors: offloaded 0/4 layers to GPU",
                                 "llama_kv_cache: size = 8.00 MiB"};
  bool fail_launch = false;
  bool die_at_start = false;
};

class FakeProber final : public EngineProber {
 public:
  explicit FakeProber(FakeClock& clock) : clock_(clock) {}
  CheckResult health(const EngineEndpoint&, Millis) override {
    ++health_calls;
    return health_ok ? CheckResult{true, 200, ""}
                     : CheckResult{false, 503, "GET /health: HTTP 503 Loading model"};
  }
  CheckResult deep(const EngineEndpoint& ep, Millis) override {
    std::lock_guard lock(mu);
    deep_times.push_back(clock_.now());
    // Port 40001 is the first engine, 40002 the second...
    if (deep_fails_for_port == ep.port) return {false, 0, "GET /slots: no answer within 5000 ms (Read)"};
    return {true, 200, ""};
  }
  CheckResult completion(const EngineEndpoint& ep, Millis) override {
    ++completion_calls;
    return completion_ok && completion_fails_for_port != ep.port
               ? CheckResult{true, 200, ""}
               : CheckResult{false, 500, "1-token completion: HTTP 500"};
  }
  size_t deep_calls() {
    std::lock_guard lock(mu);
    return deep_times.size();
  }

  std::atomic<bool> health_ok{true};
  std::atomic<bool> completion_ok{true};
  std::atomic<int> health_calls{0};
  std::atomic<int> deep_fails_for_port{0};
  std::atomic<int> completion_fails_for_port{0};
  std::atomic<int> completion_calls{0};
  std::mutex mu;
  std::vector<SteadyTime> deep_times;

 private:
  FakeClock& clock_;
};

class CountingVerifier final : public LiveVerifier {
 public:
  explicit CountingVerifier(std::vector<std::string> findings) : findings_(std::move(findings)) {}
  void on_line(std::string_view) override { ++lines_; }
  VerificationReport finish() override {
    return {"fake checker", {std::to_string(lines_) + " lines seen"}, findings_};
  }

 private:
  int lines_ = 0;
  std::vector<std::string> findings_;
};

// Polls `pred` (for conditions that change no supervisor state) until it holds or 30 s pass
// (the deadline is for failures only: a loaded machine or a sanitizer build runs threads late).
bool eventually(const std::function<bool()>& pred) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(milliseconds(1));
  }
  return true;
}

class SupervisorTest : public ::testing::Test {
 protected:
  SupervisorConfig config(std::vector<std::string> findings = {}) {
    SupervisorConfig c;
    c.launch.binary = "/fake/llama-server";
    c.launch.args = {"-m", "m.gguf", "--api-key", "secret"};
    c.timing.start_timeout = milliseconds(30000);
    c.timing.ready_timeout = milliseconds(10000);
    c.timing.health_interval = milliseconds(1000);
    c.timing.poll = milliseconds(100);
    c.restart.backoff_initial = milliseconds(500);
    c.restart.backoff_max = milliseconds(4000);
    c.verifier = [findings] { return std::make_unique<CountingVerifier>(findings); };
    c.on_event = [this](std::string_view l) {
      std::lock_guard lock(mu_);
      events_.emplace_back(l);
    };
    return c;
  }

  std::unique_ptr<Supervisor> make(SupervisorConfig c) {
    auto s = std::make_unique<Supervisor>(std::move(c), SupervisorDeps{&clock_, &launcher_, &prober_});
    s->add_listener([this](const Transition& t, const SupervisorStatus&) {
      std::lock_guard lock(mu_);
      transitions_.push_back(t);
    });
    return s;
  }

  static bool is(const SupervisorStatus& s, State st, uint64_t generation = 0) {
    return s.state == st && (generation == 0 || s.generation == generation);
  }

  std::vector<Transition> transitions() {
    std::lock_guard lock(mu_);
    return transitions_;
  }
  std::string events() {
    std::lock_guard lock(mu_);
    std::string out;
    for (const auto& e : events_) out += e + "\n";
    return out;
  }

  FakeClock clock_;
  FakeLauncher launcher_;
  FakeProber prober_{clock_};
  std::mutex mu_;
  std::vector<Transition> transitions_;
  std::vector<std::string> events_;
  const milliseconds wait_{5000};
};

TEST_F(SupervisorTest, StartsVerifiesAndServes) {
  auto sup = make(config());
  sup->start();
  auto st = sup->wait_until([](const SupervisorStatus& s) { return is(s, State::kReady); }, wait_);
  ASSERT_EQ(st.state, State::kReady) << st.cause;
  EXPECT_EQ(st.generation, 1u);
  EXPECT_EQ(st.pid, 1);
  ASSERT_TRUE(st.endpoint);
  EXPECT_EQ(st.endpoint->base_url(), "http://127.0.0.1:40001");
  ASSERT_TRUE(st.verification);
  EXPECT_EQ(st.verification->verified, std::vector<std::string>{"2 lines seen"});
  auto t = transitions();
  ASSERT_GE(t.size(), 2u);
  EXPECT_EQ(t[0].from, State::kStarting);
  EXPECT_EQ(t[0].to, State::kVerifying);
  EXPECT_EQ(t[1].to, State::kReady);
  EXPECT_NE(t[1].cause.find("the startup log matched (fake checker)"), std::string::npos) << t[1].cause;
  // Deep probes follow at the health interval.
  ASSERT_TRUE(eventually([&] { return prober_.deep_calls() >= 3; }));
  {
    std::lock_guard lock(prober_.mu);
    EXPECT_EQ(prober_.deep_times[1] - prober_.deep_times[0], milliseconds(1000));
  }
  sup->stop();
  EXPECT_EQ(sup->status().state, State::kStopped);
  EXPECT_EQ(launcher_.process(0)->stops.load(), 1);
  EXPECT_EQ(sup->status().pid, 0);
  const std::string ev = events();
  EXPECT_NE(ev.find("--api-key ***"), std::string::npos) << ev;
  EXPECT_EQ(ev.find("secret"), std::string::npos) << ev;
  EXPECT_NE(ev.find("engine ready -> stopped: stop requested"), std::string::npos) << ev;
}

TEST_F(SupervisorTest, MismatchFailsUnderFailPolicy) {
  auto sup = make(config({"KV cache K type is q8_0, the plan says f16: pass -ctk f16"}));
  sup->start();
  auto st = sup->wait_until([](const SupervisorStatus& s) { return is_terminal(s.state); }, wait_);
  ASSERT_EQ(st.state, State::kFailed);
  EXPECT_NE(st.cause.find("startup verification failed (fake checker): KV cache K type is q8_0"),
            std::string::npos)
      << st.cause;
  sup->stop();
  EXPECT_EQ(launcher_.process(0)->stops.load(), 1);
  EXPECT_EQ(launcher_.processes.size(), 1u);  // a mismatch is not retried
}

TEST_F(SupervisorTest, MismatchOnlyWarnsUnderWarnPolicy) {
  auto c = config({"fewer cells than planned"});
  c.on_mismatch = OnMismatch::kWarn;
  auto sup = make(std::move(c));
  sup->start();
  auto st = sup->wait_until([](const SupervisorStatus& s) { return is(s, State::kReady); }, wait_);
  ASSERT_EQ(st.state, State::kReady) << st.cause;
  ASSERT_TRUE(st.verification);
  EXPECT_EQ(st.verification->findings, std::vector<std::string>{"fewer cells than planned"});
  EXPECT_NE(st.cause.find("1 verification finding(s), --on-mismatch warn"), std::string::npos) << st.cause;
  EXPECT_EQ(events().find("MISMATCH"), std::string::npos);  // details go to the log only
}

TEST_F(SupervisorTest, CrashRestartsAfterTheBackoff) {
  auto sup = make(config());
  sup->start();
  ASSERT_EQ(sup->wait_until([](const SupervisorStatus& s) { return is(s, State::kReady); }, wait_).state,
            State::kReady);
  launcher_.process(0)->running = false;  // the engine dies
  auto st = sup->wait_until([](const SupervisorStatus& s) { return is(s, State::kReady, 2); }, wait_);
  ASSERT_EQ(st.state, State::kReady) << st.cause;
  EXPECT_EQ(st.restarts, 1);
  EXPECT_EQ(st.pid, 2);
  auto t = transitions();
  const Transition* crash = nullptr;
  const Transition* restart = nullptr;
  for (const auto& x : t) {
    if (x.to == State::kRestarting) crash = &x;
    if (x.from == State::kRestarting && x.to == State::kStarting) restart = &x;
  }
  ASSERT_TRUE(crash && restart);
  EXPECT_EQ(crash->event, Event::kExited);
  EXPECT_NE(crash->cause.find("engine exited: killed by signal 9"), std::string::npos) << crash->cause;
  EXPECT_EQ(restart->at - crash->at, milliseconds(500));
}

TEST_F(SupervisorTest, ZombieIsKilledAndRestarted) {
  prober_.deep_fails_for_port = 40001;  // the first engine's queue never answers
  auto sup = make(config());
  sup->start();
  auto st = sup->wait_until([](const SupervisorStatus& s) { return is(s, State::kReady, 2); }, wait_);
  ASSERT_EQ(st.state, State::kReady) << st.cause;
  EXPECT_EQ(launcher_.process(0)->stops.load(), 1);
  std::vector<std::pair<State, State>> seen;
  for (const auto& x : transitions()) seen.emplace_back(x.from, x.to);
  const std::vector<std::pair<State, State>> expected{
      {State::kStarting, State::kVerifying},  {State::kVerifying, State::kReady},
      {State::kReady, State::kDegraded},      {State::kDegraded, State::kRestarting},
      {State::kRestarting, State::kStarting}, {State::kStarting, State::kVerifying},
      {State::kVerifying, State::kReady}};
  ASSERT_GE(seen.size(), expected.size());
  EXPECT_TRUE(std::equal(expected.begin(), expected.end(), seen.begin()));
  EXPECT_NE(transitions()[3].cause.find("zombie: 3 deep probes in a row failed"), std::string::npos);
}

TEST_F(SupervisorTest, UpstreamFailureTriggersAnImmediateProbe) {
  auto c = config();
  c.timing.health_interval = milliseconds(1000LL * 3600 * 24 * 365);  // never by the timer
  auto sup = make(std::move(c));
  sup->start();
  ASSERT_EQ(sup->wait_until([](const SupervisorStatus& s) { return is(s, State::kReady); }, wait_).state,
            State::kReady);
  prober_.deep_fails_for_port = 40001;
  sup->report_upstream_failure("POST /v1/chat/completions: HTTP 502");
  auto st = sup->wait_until([](const SupervisorStatus& s) { return is(s, State::kDegraded); }, wait_);
  ASSERT_EQ(st.state, State::kDegraded);
  EXPECT_NE(st.cause.find("probed after the proxy saw: POST /v1/chat/completions: HTTP 502"),
            std::string::npos)
      << st.cause;
  EXPECT_EQ(prober_.deep_calls(), 1u);
}

TEST_F(SupervisorTest, RequestsFailingSwitchesToCompletionProbesAndRestarts) {
  // The engine answers /slots but fails every real request (llama.cpp#17316): only
  // completion probes see it; three failures in a row make it a zombie.
  auto c = config();
  c.timing.health_interval = milliseconds(1000LL * 3600 * 24 * 365);  // never by the timer
  auto sup = make(std::move(c));
  sup->start();
  ASSERT_EQ(sup->wait_until([](const SupervisorStatus& s) { return is(s, State::kReady); }, wait_).state,
            State::kReady);
  prober_.completion_fails_for_port = 40001;
  // A plain upstream failure report probes /slots, which passes: still ready.
  sup->report_upstream_failure("the engine answered 500");
  EXPECT_TRUE(eventually([&] { return prober_.deep_calls() >= 1; }));
  EXPECT_EQ(prober_.deep_calls(), 1u);
  for (int n = 1; n <= 3; ++n) {
    const int before = prober_.completion_calls.load();
    sup->report_requests_failing("the engine answered 500 to 2 requests in a row");
    EXPECT_TRUE(eventually([&] { return prober_.completion_calls.load() != before; }));
  }
  auto st = sup->wait_until([](const SupervisorStatus& s) { return is(s, State::kReady, 2); }, wait_);
  ASSERT_EQ(st.state, State::kReady) << st.cause;
  bool zombie = false;
  for (const auto& t : transitions()) {
    if (t.to == State::kRestarting && t.cause.find("1-token completion: HTTP 500") != std::string::npos) zombie = true;
  }
  EXPECT_TRUE(zombie);
  // The new engine is trusted again: the next report probes /slots.
  const size_t deep_before = prober_.deep_calls();
  sup->report_upstream_failure("the engine answered 500");
  EXPECT_TRUE(eventually([&] { return prober_.deep_calls() != deep_before; }));
  EXPECT_EQ(prober_.deep_calls(), deep_before + 1);
}

TEST_F(SupervisorTest, FirstStartCrashIsFinal) {
  launcher_.die_at_start = true;
  auto sup = make(config());
  sup->start();
  auto st = sup->wait_until([](const SupervisorStatus& s) { return is_terminal(s.state); }, wait_);
  ASSERT_EQ(st.state, State::kFailed);
  EXPECT_NE(st.cause.find("the first start failed: the engine killed by signal 9"), std::string::npos)
      << st.cause;
  EXPECT_NE(st.cause.find("fake engine output"), std::string::npos) << st.cause;
}

TEST_F(SupervisorTest, StartTimeout) {
  prober_.health_ok = false;
  auto sup = make(config());
  sup->start();
  auto st = sup->wait_until([](const SupervisorStatus& s) { return is_terminal(s.state); }, wait_);
  ASSERT_EQ(st.state, State::kFailed);
  EXPECT_NE(st.cause.find("no GET /health 200 within 30000 ms (last: GET /health: HTTP 503 Loading model)"),
            std::string::npos)
      << st.cause;
  sup->stop();  // joins the owner, which stops the engine after the transition
  EXPECT_EQ(launcher_.process(0)->stops.load(), 1);
  EXPECT_GE(prober_.health_calls.load(), 300);  // polled every 100 ms
}

TEST_F(SupervisorTest, LaunchErrorIsReported) {
  launcher_.fail_launch = true;
  auto sup = make(config());
  sup->start();
  auto st = sup->wait_until([](const SupervisorStatus& s) { return is_terminal(s.state); }, wait_);
  ASSERT_EQ(st.state, State::kFailed);
  EXPECT_NE(st.cause.find("cannot start the engine: exec failed"), std::string::npos) << st.cause;
}

TEST_F(SupervisorTest, RestartsGiveUpAfterRepeatedStartFailures) {
  auto c = config();
  c.restart.max_failed_starts = 3;
  auto sup = make(std::move(c));
  sup->start();
  ASSERT_EQ(sup->wait_until([](const SupervisorStatus& s) { return is(s, State::kReady); }, wait_).state,
            State::kReady);
  prober_.completion_ok = false;  // restarted engines never complete a token
  launcher_.process(0)->running = false;
  auto st = sup->wait_until([](const SupervisorStatus& s) { return is_terminal(s.state); }, wait_);
  ASSERT_EQ(st.state, State::kFailed);
  EXPECT_NE(
      st.cause.find("3 starts in a row failed; the last: no successful 1-token completion within 10000 ms"),
      std::string::npos)
      << st.cause;
  EXPECT_EQ(st.generation, 4u);
  // Backoff between attempts: 500, 1000, 2000 ms.
  std::vector<long> delays;
  SteadyTime restart_at{};
  for (const auto& x : transitions()) {
    if (x.to == State::kRestarting) restart_at = x.at;
    if (x.from == State::kRestarting)
      delays.push_back(static_cast<long>((x.at - restart_at) / milliseconds(1)));
  }
  EXPECT_EQ(delays, (std::vector<long>{500, 1000, 2000}));
}

TEST_F(SupervisorTest, StopWhileStarting) {
  prober_.health_ok = false;
  auto c = config();
  c.timing.start_timeout = milliseconds(1000LL * 3600 * 24 * 365);
  auto sup = make(std::move(c));
  sup->start();
  ASSERT_TRUE(eventually([&] { return prober_.health_calls.load() > 5; }));
  sup->stop();
  EXPECT_EQ(sup->status().state, State::kStopped);
  EXPECT_EQ(launcher_.process(0)->stops.load(), 1);
}

}  // namespace
}  // namespace kvgate::engine
