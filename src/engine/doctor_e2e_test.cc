// Verification on live logs of the real engines, mainline (the pinned build) and ik_llama.cpp
// (when $KVGATE_IK_SERVER names a build; skipped otherwise): the verifier is fed the server's
// output line by line as it arrives (the way the supervisor uses it), reports the log complete
// before the server is ready, finds nothing when the server runs as planned, and names the
// difference when it does not.
#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>

#include "engine/server_process.h"
#include "engine/verify.h"
#include "gguf/file.h"
#include "plan/model_desc.h"
#include "testing/engine_e2e.h"
#include "testing/engines_under_test.h"

namespace kvgate::engine {
namespace {

struct LiveResult {
  Comparison at_ready;
  bool complete_at_ready = false;
  StartupFacts facts;
};

// Starts `engine` on `model` with one thread (testing::kEngineThreads) and --no-warmup (mainline: -fit off;
// ik: --log-disable) and `args`.
LiveResult run_live(const testing::EngineUnderTest& engine, const std::filesystem::path& model,
                    std::optional<Expectation> expected, const std::vector<std::string>& args) {
  LiveResult out;
  auto binary = testing::engine_binary(engine);
  EXPECT_TRUE(binary.ok()) << binary.error().message();
  if (!binary.ok()) return out;
  std::mutex mu;
  StartupVerifier verifier(std::move(expected));
  std::vector<std::string> argv = {"-m", model.string(), "-t", testing::engine_threads(), "--no-warmup"};
  if (engine.fork == plan::Fork::kMainline) argv.insert(argv.end(), {"-fit", "off"});
  if (engine.fork == plan::Fork::kIk) argv.push_back("--log-disable");  // no llama.log in the cwd
  argv.insert(argv.end(), args.begin(), args.end());
  auto server = ServerProcess::start({.binary = *binary, .args = argv, .on_line = [&](std::string_view line) {
                                        std::lock_guard lock(mu);
                                        verifier.feed(line);
                                      }});
  EXPECT_TRUE(server.ok()) << server.error().message();
  if (!server.ok()) return out;
  auto ready = (*server)->wait_ready(std::chrono::seconds(60));
  EXPECT_TRUE(ready.ok()) << ready.error().message();
  {
    std::lock_guard lock(mu);
    out.complete_at_ready = verifier.complete();
    out.at_ready = verifier.finish();
    out.facts = verifier.facts();
  }
  (*server)->signal(SIGKILL);
  (*server)->stop(std::chrono::seconds(5));
  return out;
}

bool has(const Comparison& c, std::string_view code) {
  return std::any_of(c.findings.begin(), c.findings.end(), [&](const Finding& f) { return f.code == code; });
}

std::string dump(const Comparison& c) {
  std::string out;
  for (const auto& f : c.findings) out += std::string(severity_name(f.severity)) + " " + f.code + ": " + f.message + "\n";
  return out;
}

class DoctorLiveE2eTest : public ::testing::TestWithParam<plan::Fork> {
 protected:
  static void SetUpTestSuite() {
    auto m = testing::TempModel::synthesize(*gguf::synth_defaults("gemma3"), "doctor");
    ASSERT_TRUE(m.ok()) << m.error().message();
    model_ = new testing::TempModel(std::move(*m));
    auto file = gguf::File::open(model_->path());
    ASSERT_TRUE(file.ok());
    auto d = plan::describe_model(*file);
    ASSERT_TRUE(d.ok());
    desc_ = new plan::ModelDescriptor(std::move(*d));
  }
  static void TearDownTestSuite() {
    delete model_;
    delete desc_;
  }
  void SetUp() override {
    engine_.fork = GetParam();
    if (GetParam() == plan::Fork::kIk) {
      engine_.server = testing::ik_server_under_test();
      if (!engine_.server) GTEST_SKIP() << testing::kIkAbsent;
    }
  }
  Expectation expect(const plan::ServerSettings& s) const {
    auto p = plan::plan_memory(*desc_, s, {.fork = GetParam(), .has_accelerator = false});
    EXPECT_TRUE(p.ok()) << p.error().message();
    return expectation_from_plan(*p, s);
  }
  static plan::ServerSettings settings() {
    plan::ServerSettings s;
    s.ctx = 8192;
    s.parallel = 2;
    s.cache_type_k = s.cache_type_v = "q8_0";
    s.flash_attn = plan::FlashAttn::kOn;
    return s;
  }
  // Mainline prints its allocation lines only at -lv 4; ik at any verbosity (and has no -lv).
  std::vector<std::string> args(const char* ctx, const char* type) const {
    std::vector<std::string> a = {"-c", ctx, "-np", "2", "-ctk", type, "-ctv", type, "-fa", "on"};
    if (GetParam() == plan::Fork::kMainline) a.insert(a.begin(), {"-lv", "4"});
    return a;
  }
  LiveResult run(const std::vector<std::string>& a) const {
    return run_live(engine_, model_->path(), expect(settings()), a);
  }
  testing::EngineUnderTest engine_;
  static testing::TempModel* model_;
  static plan::ModelDescriptor* desc_;
};
testing::TempModel* DoctorLiveE2eTest::model_ = nullptr;
plan::ModelDescriptor* DoctorLiveE2eTest::desc_ = nullptr;

TEST_P(DoctorLiveE2eTest, AsPlannedNothingToReport) {
  LiveResult r = run(args("8192", "q8_0"));
  EXPECT_TRUE(r.complete_at_ready);
  EXPECT_TRUE(r.at_ready.findings.empty()) << dump(r.at_ready);
  EXPECT_EQ(r.facts.fork, GetParam());
  if (GetParam() == plan::Fork::kMainline) {
    EXPECT_EQ(r.facts.kv_caches.size(), 2u) << "both sliding-window caches";
  } else {
    EXPECT_TRUE(r.facts.kv_self) << "ik's one KV self size line";
  }
}

TEST_P(DoctorLiveE2eTest, WrongTypeAndSmallerContextAreFindings) {
  LiveResult r = run(args("4096", "q4_0"));
  EXPECT_TRUE(r.at_ready.has_errors());
  EXPECT_TRUE(has(r.at_ready, "kv_type_mismatch")) << dump(r.at_ready);
  EXPECT_TRUE(has(r.at_ready, "context_smaller")) << dump(r.at_ready);
  EXPECT_TRUE(has(r.at_ready, "kv_smaller_than_planned")) << dump(r.at_ready);
  if (GetParam() == plan::Fork::kMainline) {
    EXPECT_TRUE(has(r.at_ready, "fewer_cells")) << dump(r.at_ready);  // ik logs no cells
  }
  for (const auto& f : r.at_ready.findings) {
    if (f.code != "context_smaller") continue;
    const bool names_fit = f.message.find("-fit") != std::string::npos;
    EXPECT_EQ(names_fit, GetParam() == plan::Fork::kMainline) << "ik has no -fit: " << f.message;
  }
}

// Mainline's default verbosity hides the allocation lines and the finding says -lv 4; ik
// prints them at its default, so the same start is complete and as planned.
TEST_P(DoctorLiveE2eTest, DefaultVerbosity) {
  LiveResult r = run({"-c", "8192", "-np", "2", "-ctk", "q8_0", "-ctv", "q8_0", "-fa", "on"});
  if (GetParam() == plan::Fork::kIk) {
    EXPECT_TRUE(r.complete_at_ready);
    EXPECT_TRUE(r.at_ready.findings.empty()) << dump(r.at_ready);
    return;
  }
  EXPECT_FALSE(r.complete_at_ready);
  EXPECT_TRUE(has(r.at_ready, "no_allocation_lines")) << dump(r.at_ready);
  bool names_lv4 = false;
  for (const auto& f : r.at_ready.findings) names_lv4 = names_lv4 || f.message.find("-lv 4") != std::string::npos;
  EXPECT_TRUE(names_lv4) << dump(r.at_ready);
}

INSTANTIATE_TEST_SUITE_P(Engines, DoctorLiveE2eTest, ::testing::Values(plan::Fork::kMainline, plan::Fork::kIk),
                         [](const ::testing::TestParamInfo<plan::Fork>& p) { return testing::fork_param_name(p.param); });

}  // namespace
}  // namespace kvgate::engine
