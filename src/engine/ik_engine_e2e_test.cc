// Starts a real ik_llama.cpp build ($KVGATE_IK_SERVER; skipped without one) cannot complete,
// on a synthesized model: the CPU backend's unsupported cache combination (ggml aborts, then
// ik's crash handler prints a gdb backtrace), a quantized V cache without flash attention
// (exit 1) and a q8_KV V cache (a failed GGML_ASSERT). The live verifier must call each a
// failed start and the supervisor's failure must quote the engine's own error line, not gdb.
#include <mutex>

#include <gtest/gtest.h>

#include "engine/server_process.h"
#include "engine/supervisor.h"
#include "engine/verify.h"
#include "testing/engine_e2e.h"
#include "testing/engines_under_test.h"

namespace kvgate::engine {
namespace {

struct FailedStart {
  const char* name;
  std::vector<std::string> flags;
  const char* engine_says;  // what the engine's own error line holds
  const char* finding;
};

std::vector<FailedStart> failed_starts() {
  return {
      {"bf16",
       {"-ctk", "bf16", "-ctv", "bf16"},
       "K cache bf16 coupled with V cache bf16 is not a supported combination",
       "engine_crashed"},
      {"f32_without_flash_attention",
       {"-ctk", "f32", "-ctv", "f32", "-fa", "off"},
       "V cache quantization requires flash_attn",
       "engine_error"},
      {"q8_KV", {"-ctv", "q8_KV"}, "GGML_ASSERT(", "engine_crashed"},
  };
}

class IkEngineE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto m = testing::TempModel::synthesize(*gguf::synth_defaults("qwen3"), "ik_engine");
    ASSERT_TRUE(m.ok()) << m.error().message();
    model_ = new testing::TempModel(std::move(*m));
  }
  static void TearDownTestSuite() { delete model_; }
  void SetUp() override {
    ik_ = testing::ik_server_under_test();
    if (!ik_) GTEST_SKIP() << testing::kIkAbsent;
  }
  // The command kvgate runs (without the key), with warm-up: the bf16 abort happens in the
  // first graph computation, which --no-warmup would move to the first request.
  // --log-disable only keeps ik from writing llama.log into the working directory.
  std::vector<std::string> args(const std::vector<std::string>& flags) const {
    std::vector<std::string> a = {"-m", model_->path().string(), "-c", "4096", "-np", "1"};
    a.insert(a.end(), {"-ctk", "f16", "-ctv", "f16", "-fa", "auto", "--context-shift", "off"});
    a.insert(a.end(), {"-t", testing::engine_threads(), "--log-disable"});
    a.insert(a.end(), flags.begin(), flags.end());
    return a;
  }
  std::optional<std::filesystem::path> ik_;
  static testing::TempModel* model_;
};
testing::TempModel* IkEngineE2eTest::model_ = nullptr;

TEST_F(IkEngineE2eTest, LiveVerifierCallsEachAFailedStart) {
  for (const FailedStart& c : failed_starts()) {
    SCOPED_TRACE(c.name);
    std::mutex mu;
    StartupVerifier verifier(std::nullopt);
    auto server =
        ServerProcess::start({.binary = *ik_, .args = args(c.flags), .on_line = [&](std::string_view line) {
                                std::lock_guard lock(mu);
                                verifier.feed(line);
                              }});
    ASSERT_TRUE(server.ok()) << server.error().message();
    EXPECT_FALSE((*server)->wait_ready(std::chrono::seconds(60)).ok());
    (*server)->stop(std::chrono::seconds(5));
    std::lock_guard lock(mu);
    const Comparison c_final = verifier.finish();
    bool found = false;
    for (const auto& f : c_final.findings) {
      if (f.code != c.finding) continue;
      found = true;
      EXPECT_EQ(f.severity, Severity::kError);
      EXPECT_NE(f.message.find(c.engine_says), std::string::npos) << f.message;
    }
    EXPECT_TRUE(found) << c.finding << " missing; errors seen: " << verifier.facts().errors.size();
    EXPECT_EQ(verifier.facts().fork, plan::Fork::kIk);
  }
}

TEST_F(IkEngineE2eTest, SupervisorFailureQuotesTheEngineNotTheCrashHandler) {
  for (const FailedStart& c : failed_starts()) {
    SCOPED_TRACE(c.name);
    SupervisorConfig config;
    config.launch = {.binary = *ik_, .args = args(c.flags)};
    config.restart.max_failed_starts = 1;
    config.timing.start_timeout = Millis(60000);
    Supervisor supervisor(config);
    supervisor.start();
    const SupervisorStatus st = supervisor.wait_until(
        [](const SupervisorStatus& s) { return s.state == State::kFailed; }, Millis(90000));
    supervisor.stop();
    ASSERT_EQ(st.state, State::kFailed) << st.cause;
    EXPECT_NE(st.cause.find("; it said:\n  | "), std::string::npos) << st.cause;
    EXPECT_NE(st.cause.find(c.engine_says), std::string::npos) << st.cause;
    EXPECT_EQ(st.cause.find("[Inferior"), std::string::npos) << st.cause;
    EXPECT_EQ(st.cause.find("libthread_db"), std::string::npos) << st.cause;
  }
}

}  // namespace
}  // namespace kvgate::engine
