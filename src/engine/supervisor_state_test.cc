#include "engine/supervisor_state.h"

#include <gtest/gtest.h>

namespace kvgate::engine {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class LifecycleTest : public ::testing::Test {
 protected:
  LifecycleTest() { policy_.retry_first_start = false; }

  std::optional<Transition> on(Lifecycle& l, Event e, std::string cause = "x") {
    return l.on(e, cause, now_);
  }
  // Drives a fresh lifecycle to ready.
  Lifecycle ready() {
    Lifecycle l(policy_);
    on(l, Event::kHealthy);
    on(l, Event::kVerified);
    EXPECT_EQ(l.state(), State::kReady);
    return l;
  }

  RestartPolicy policy_;
  SteadyTime now_ = SteadyTime() + seconds(1000);
};

TEST_F(LifecycleTest, StartToReady) {
  Lifecycle l(policy_);
  EXPECT_EQ(l.state(), State::kStarting);
  auto t = on(l, Event::kHealthy, "health ok");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->from, State::kStarting);
  EXPECT_EQ(t->to, State::kVerifying);
  EXPECT_EQ(t->cause, "health ok");
  t = on(l, Event::kVerified);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->to, State::kReady);
  EXPECT_TRUE(l.ever_ready());
}

TEST_F(LifecycleTest, EventsThatDoNotApplyAreIgnored) {
  Lifecycle l(policy_);
  EXPECT_FALSE(on(l, Event::kVerified));        // not verifying yet
  EXPECT_FALSE(on(l, Event::kProbeOk));         // not serving
  EXPECT_FALSE(on(l, Event::kBackoffElapsed));  // not restarting
  EXPECT_EQ(l.state(), State::kStarting);
  Lifecycle r = ready();
  EXPECT_FALSE(on(r, Event::kProbeOk));  // ready stays ready: no transition
  EXPECT_FALSE(on(r, Event::kHealthy));
  EXPECT_EQ(r.state(), State::kReady);
}

TEST_F(LifecycleTest, FirstStartFailureIsFinal) {
  Lifecycle l(policy_);
  auto t = on(l, Event::kStartFailed, "exited with code 1");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->to, State::kFailed);
  EXPECT_EQ(t->cause, "the first start failed: exited with code 1");
  EXPECT_FALSE(on(l, Event::kHealthy));  // terminal
  EXPECT_FALSE(on(l, Event::kStopRequested));
}

TEST_F(LifecycleTest, FirstStartMayRetryWhenAsked) {
  policy_.retry_first_start = true;
  Lifecycle l(policy_);
  on(l, Event::kHealthy);
  auto t = on(l, Event::kStartFailed, "no completion");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->from, State::kVerifying);
  EXPECT_EQ(t->to, State::kRestarting);
  EXPECT_EQ(l.restart_at(), now_ + policy_.backoff_initial);
}

TEST_F(LifecycleTest, MismatchIsFinal) {
  Lifecycle l(policy_);
  on(l, Event::kHealthy);
  auto t = on(l, Event::kMismatch, "KV type q8_0, planned f16");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->to, State::kFailed);
}

TEST_F(LifecycleTest, ZombieAfterConsecutiveProbeFailures) {
  policy_.zombie_after = 3;
  Lifecycle l = ready();
  auto t = on(l, Event::kProbeFailed, "GET /slots: no answer");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->to, State::kDegraded);
  EXPECT_FALSE(on(l, Event::kProbeFailed));  // still degraded
  EXPECT_EQ(l.probe_failures_in_row(), 2);
  t = on(l, Event::kProbeFailed, "GET /slots: no answer");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->to, State::kRestarting);
  EXPECT_NE(t->cause.find("zombie: 3 deep probes in a row failed"), std::string::npos) << t->cause;
  EXPECT_EQ(l.restarts(), 1);
}

TEST_F(LifecycleTest, ProbeSuccessClearsDegraded) {
  Lifecycle l = ready();
  on(l, Event::kProbeFailed);
  on(l, Event::kProbeFailed);
  auto t = on(l, Event::kProbeOk);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->to, State::kReady);
  EXPECT_EQ(l.probe_failures_in_row(), 0);
  on(l, Event::kProbeFailed);
  on(l, Event::kProbeFailed);
  EXPECT_EQ(l.state(), State::kDegraded);  // the count started over
}

TEST_F(LifecycleTest, CrashBackoffDoublesUpToTheCapAndGivesUp) {
  policy_.backoff_initial = milliseconds(1000);
  policy_.backoff_max = milliseconds(5000);
  policy_.max_failed_starts = 4;
  Lifecycle l = ready();
  ASSERT_TRUE(on(l, Event::kExited, "killed by signal 9"));
  EXPECT_EQ(l.state(), State::kRestarting);
  EXPECT_EQ(l.last_backoff(), milliseconds(1000));
  // The restarted engine never gets ready again: 2 s, 4 s, then capped at 5 s, then give up.
  std::vector<long> delays;
  for (int i = 0; i < 5 && l.state() == State::kRestarting; ++i) {
    now_ = l.restart_at();
    ASSERT_TRUE(on(l, Event::kBackoffElapsed));
    EXPECT_EQ(l.state(), State::kStarting);
    auto t = on(l, Event::kStartFailed, "exited with code 1");
    ASSERT_TRUE(t);
    if (l.state() == State::kRestarting) delays.push_back(static_cast<long>(l.last_backoff().count()));
  }
  EXPECT_EQ(delays, (std::vector<long>{2000, 4000, 5000}));
  EXPECT_EQ(l.state(), State::kFailed);
  EXPECT_EQ(l.failed_starts_in_row(), 4);
}

TEST_F(LifecycleTest, LongHealthyRunResetsTheBackoff) {
  policy_.backoff_initial = milliseconds(1000);
  policy_.backoff_reset_after = seconds(60);
  Lifecycle l = ready();
  // Crash loop: ready briefly, crash, twice: the backoff grows.
  on(l, Event::kExited);
  EXPECT_EQ(l.last_backoff(), milliseconds(1000));
  now_ = l.restart_at();
  on(l, Event::kBackoffElapsed);
  on(l, Event::kHealthy);
  on(l, Event::kVerified);
  now_ += seconds(5);
  on(l, Event::kExited);
  EXPECT_EQ(l.last_backoff(), milliseconds(2000));
  // Ready for longer than backoff_reset_after: the next crash starts over at 1 s.
  now_ = l.restart_at();
  on(l, Event::kBackoffElapsed);
  on(l, Event::kHealthy);
  on(l, Event::kVerified);
  now_ += seconds(61);
  on(l, Event::kExited);
  EXPECT_EQ(l.last_backoff(), milliseconds(1000));
  EXPECT_EQ(l.restarts(), 3);
}

TEST_F(LifecycleTest, StopFromEveryLiveState) {
  for (int steps = 0; steps < 5; ++steps) {
    Lifecycle l(policy_);
    const Event path[] = {Event::kHealthy, Event::kVerified, Event::kProbeFailed, Event::kExited};
    for (int i = 0; i < steps && i < 4; ++i) on(l, path[i]);
    const State before = l.state();
    auto t = on(l, Event::kStopRequested, "stop requested");
    ASSERT_TRUE(t) << state_name(before);
    EXPECT_EQ(t->from, before);
    EXPECT_EQ(t->to, State::kStopped);
  }
}

TEST_F(LifecycleTest, Names) {
  EXPECT_STREQ(state_name(State::kDegraded), "degraded");
  EXPECT_STREQ(state_name(State::kRestarting), "restarting");
  EXPECT_STREQ(event_name(Event::kProbeFailed), "probe-failed");
}

}  // namespace
}  // namespace kvgate::engine
