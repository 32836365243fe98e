// The supervisor with the real pinned llama-server on a synthesized model: launch and
// startup verification, a deliberately wrong expectation, a crash (SIGKILL) and a hang
// (SIGSTOP) each followed by a restart that serves again.
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <unistd.h>

#include "engine/live_doctor.h"
#include "engine/pinned.h"
#include "engine/probe.h"
#include "engine/supervisor.h"
#include "gguf/file.h"
#include "gguf/synth.h"
#include "plan/launch_args.h"
#include "plan/memory_model.h"
#include "plan/model_desc.h"
#include "testing/engines_under_test.h"

namespace kvgate::engine {
namespace {

namespace fs = std::filesystem;

bool process_exists(pid_t pid) {
  // A zombie (exited, not reaped) counts as gone.
  std::ifstream stat(fmt::format("/proc/{}/stat", pid));
  if (!stat) return false;
  std::string content((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t paren = content.rfind(')');
  return paren != std::string::npos && paren + 2 < content.size() && content[paren + 2] != 'Z';
}

int completion_status(const EngineEndpoint& ep, const std::string& key) {
  httplib::Client client(ep.host, ep.port);
  client.set_read_timeout(std::chrono::seconds(30));
  httplib::Headers h;
  if (!key.empty()) h.emplace("Authorization", "Bearer " + key);
  auto res = client.Post("/v1/completions", h, R"({"prompt":"Hello","max_tokens":2})", "application/json");
  return res ? res->status : 0;
}

class SupervisorE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           fmt::format("kvgate_sup_e2e_{}_{}", ::getpid(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto vocab_path = vocab_file("qwen2");
    ASSERT_TRUE(vocab_path.ok()) << vocab_path.error().message();
    auto vocab = gguf::File::open(*vocab_path);
    ASSERT_TRUE(vocab.ok());
    model_ = dir_ / "m.gguf";
    ASSERT_TRUE(gguf::synthesize(*gguf::synth_defaults("qwen3"), &*vocab, model_).ok());
    auto bin = resolve_server();
    ASSERT_TRUE(bin.ok()) << bin.error().message();
    binary_ = *bin;
    auto probed = probe_server(binary_);
    ASSERT_TRUE(probed.ok()) << probed.error().message();
    caps_ = probed->caps;
    settings_.model_path = model_.string();
    settings_.ctx = 2048;
    settings_.threads = testing::kEngineThreads;
    settings_.api_key = "test-key-" + std::to_string(::getpid());
  }
  void TearDown() override { fs::remove_all(dir_); }

  plan::MemoryPlan plan_for(const plan::ServerSettings& s) {
    auto file = gguf::File::open(model_);
    EXPECT_TRUE(file.ok());
    auto desc = plan::describe_model(*file);
    EXPECT_TRUE(desc.ok()) << desc.error().message();
    auto p = plan::plan_memory(*desc, s, {.fork = caps_.fork, .has_accelerator = caps_.gpu_offload});
    EXPECT_TRUE(p.ok()) << p.error().message();
    return *p;
  }

  // Generous start deadlines and probe time-outs for a loaded machine (a slow probe must not
  // look like a hang); the zombie test shortens the probe time-out to detect its hang quickly.
  SupervisorConfig config(const plan::MemoryPlan& expected,
                          std::chrono::milliseconds probe_timeout = std::chrono::seconds(10)) {
    SupervisorConfig c;
    auto args = plan::launch_args(settings_, caps_);
    EXPECT_TRUE(args.ok()) << args.error().message();
    c.launch = {.binary = binary_, .args = *args, .api_key = *settings_.api_key};
    c.timing.start_timeout = std::chrono::seconds(90);
    c.timing.ready_timeout = std::chrono::seconds(60);
    c.timing.health_interval = std::chrono::milliseconds(500);
    c.timing.probe_timeout = probe_timeout;
    c.timing.stop_grace = std::chrono::seconds(3);
    c.restart.zombie_after = 2;
    c.restart.backoff_initial = std::chrono::milliseconds(200);
    c.verifier = doctor_verifier_factory(expected, settings_);
    auto log = RotatingLog::open(dir_ / "engine.log", 1 << 20, 2);
    EXPECT_TRUE(log.ok());
    c.log = std::shared_ptr<RotatingLog>(std::move(*log));
    c.on_event = [](std::string_view l) {
      std::printf("  event: %.*s\n", static_cast<int>(l.size()), l.data());
    };
    return c;
  }

  std::unique_ptr<Supervisor> start(SupervisorConfig c) {
    auto s = std::make_unique<Supervisor>(std::move(c));
    s->add_listener([this](const Transition& t, const SupervisorStatus&) {
      std::lock_guard lock(mu_);
      transitions_.push_back(t);
    });
    s->start();
    return s;
  }

  SupervisorStatus wait_ready(Supervisor& s, uint64_t generation) {
    return s.wait_until(
        [generation](const SupervisorStatus& st) {
          return (is_serving(st.state) && st.generation >= generation) || is_terminal(st.state);
        },
        std::chrono::seconds(120));
  }

  std::vector<Transition> transitions() {
    std::lock_guard lock(mu_);
    return transitions_;
  }

  fs::path dir_;
  fs::path model_;
  fs::path binary_;
  plan::ServerCaps caps_;
  plan::ServerSettings settings_;
  std::mutex mu_;
  std::vector<Transition> transitions_;
};

TEST_F(SupervisorE2eTest, LaunchesVerifiesAndServes) {
  auto sup = start(config(plan_for(settings_)));
  auto st = wait_ready(*sup, 1);
  ASSERT_EQ(st.state, State::kReady) << st.cause;
  ASSERT_TRUE(st.verification);
  EXPECT_TRUE(st.verification->passed()) << st.verification->findings.front();
  EXPECT_EQ(st.verification->checker, "plan vs startup log");
  bool kv_line = false;
  for (const auto& v : st.verification->verified)
    kv_line = kv_line || v.find("KV cache") != std::string::npos;
  EXPECT_TRUE(kv_line) << "nothing about the KV cache was verified";
  ASSERT_TRUE(st.endpoint);
  EXPECT_EQ(completion_status(*st.endpoint, *settings_.api_key), 200);
  EXPECT_EQ(completion_status(*st.endpoint, ""), 401);  // the engine requires kvgate's key
  const pid_t pid = st.pid;
  sup->stop();
  EXPECT_EQ(sup->status().state, State::kStopped);
  EXPECT_FALSE(process_exists(pid));
  std::ifstream log(dir_ / "engine.log");
  std::stringstream ss;
  ss << log.rdbuf();
  EXPECT_NE(ss.str().find("kvgate: engine start #1: pid " + std::to_string(pid)), std::string::npos);
  EXPECT_NE(ss.str().find("llama_kv_cache"), std::string::npos);  // the engine's own lines
}

TEST_F(SupervisorE2eTest, WrongExpectationFailsTheStart) {
  plan::ServerSettings wrong = settings_;
  wrong.cache_type_k = "q8_0";  // the plan expects q8_0 K; the engine is launched with f16
  auto sup = start(config(plan_for(wrong)));
  auto st = wait_ready(*sup, 1);
  ASSERT_EQ(st.state, State::kFailed) << st.cause;
  EXPECT_NE(st.cause.find("startup verification failed"), std::string::npos) << st.cause;
  EXPECT_NE(st.cause.find("kv_type_mismatch"), std::string::npos) << st.cause;
  sup->stop();
  EXPECT_EQ(sup->status().pid, 0);
}

TEST_F(SupervisorE2eTest, WrongExpectationOnlyWarnsUnderWarn) {
  plan::ServerSettings wrong = settings_;
  wrong.cache_type_v = "q8_0";
  auto c = config(plan_for(wrong));
  c.on_mismatch = OnMismatch::kWarn;
  auto sup = start(std::move(c));
  auto st = wait_ready(*sup, 1);
  ASSERT_EQ(st.state, State::kReady) << st.cause;
  ASSERT_TRUE(st.verification);
  ASSERT_FALSE(st.verification->findings.empty());
  EXPECT_NE(st.verification->findings.front().find("kv_type_mismatch"), std::string::npos);
}

TEST_F(SupervisorE2eTest, KilledEngineIsRestartedAndServesAgain) {
  auto sup = start(config(plan_for(settings_)));
  auto st = wait_ready(*sup, 1);
  ASSERT_EQ(st.state, State::kReady) << st.cause;
  const pid_t first = st.pid;
  ASSERT_EQ(::kill(first, SIGKILL), 0);
  st = wait_ready(*sup, 2);
  ASSERT_EQ(st.state, State::kReady) << st.cause;
  EXPECT_EQ(st.restarts, 1);
  EXPECT_NE(st.pid, first);
  ASSERT_TRUE(st.endpoint);
  EXPECT_EQ(completion_status(*st.endpoint, *settings_.api_key), 200);
  bool saw_crash = false;
  for (const auto& t : transitions()) {
    if (t.to == State::kRestarting) {
      saw_crash = t.event == Event::kExited && t.cause.find("killed by signal 9") != std::string::npos;
    }
  }
  EXPECT_TRUE(saw_crash);
}

TEST_F(SupervisorE2eTest, StoppedEngineIsAZombieAndIsReplaced) {
  auto sup = start(config(plan_for(settings_), std::chrono::seconds(2)));
  auto st = wait_ready(*sup, 1);
  ASSERT_EQ(st.state, State::kReady) << st.cause;
  const pid_t first = st.pid;
  const auto stopped_at = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(first, SIGSTOP), 0);  // alive, but answers nothing
  st = wait_ready(*sup, 2);
  const auto detected = std::chrono::steady_clock::now() - stopped_at;
  ASSERT_EQ(st.state, State::kReady) << st.cause;
  EXPECT_FALSE(process_exists(first));
  ASSERT_TRUE(st.endpoint);
  EXPECT_EQ(completion_status(*st.endpoint, *settings_.api_key), 200);
  std::vector<std::pair<State, State>> seen;
  std::string zombie_cause;
  for (const auto& t : transitions()) {
    seen.emplace_back(t.from, t.to);
    if (t.to == State::kRestarting) zombie_cause = t.cause;
  }
  ASSERT_GE(seen.size(), 4u);
  EXPECT_EQ(seen[2], std::make_pair(State::kReady, State::kDegraded));
  EXPECT_EQ(seen[3], std::make_pair(State::kDegraded, State::kRestarting));
  EXPECT_NE(zombie_cause.find("zombie: 2 deep probes in a row failed"), std::string::npos) << zombie_cause;
  std::printf("SIGSTOP to serving again: %.1f s\n", std::chrono::duration<double>(detected).count());
}

}  // namespace
}  // namespace kvgate::engine
