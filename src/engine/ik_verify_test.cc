// Plan-vs-log verification on logs recorded from a real ik_llama.cpp build
// (tests/fixtures/ik/): its starts match their plans with nothing to report, its crashed and
// failed starts are error findings that quote the engine's own words, and hints name only
// flags the fork has.
#include <algorithm>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "engine/verify.h"
#include "gguf/synth.h"
#include "testing/paths.h"
#include "testing/test_models.h"

namespace kvgate::engine {
namespace {

StartupFacts recorded(const std::string& dir, const std::string& name) {
  std::ifstream in(std::string(kvgate::testing::source_dir()) + "/tests/fixtures/" + dir + "/" + name);
  EXPECT_TRUE(in.good()) << name;
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_startup_log(ss.str());
}

const Finding* find(const Comparison& c, std::string_view code) {
  auto it =
      std::find_if(c.findings.begin(), c.findings.end(), [&](const Finding& f) { return f.code == code; });
  return it == c.findings.end() ? nullptr : &*it;
}

std::string dump(const Comparison& c) {
  std::string out;
  for (const auto& f : c.findings)
    out += std::string(severity_name(f.severity)) + " " + f.code + ": " + f.message + "\n";
  return out;
}

// The settings of the recorded starts: `kvgate plan MODEL --server IK --ctx 8192`.
plan::ServerSettings recorded_settings() {
  plan::ServerSettings s;
  s.ctx = 8192;
  s.parallel = 1;
  s.cache_type_k = s.cache_type_v = "f16";
  s.n_gpu_layers = 0;  // a CPU build
  return s;
}

Expectation ik_plan(const std::string& kind) {
  auto model = testing::describe_synth(gguf::find_synth_preset("tiny-" + kind)->spec);
  EXPECT_TRUE(model.ok()) << model.error().message();
  auto p =
      plan::plan_memory(*model, recorded_settings(), {.fork = plan::Fork::kIk, .has_accelerator = false});
  EXPECT_TRUE(p.ok()) << p.error().message();
  return expectation_from_plan(*p, recorded_settings());
}

TEST(IkVerify, RecordedStartsMatchTheirPlanWithNothingToReport) {
  for (const std::string kind : {"llama", "qwen3", "qwen35", "gemma3"}) {
    for (const std::string suffix : {".log", ".stderr.log"}) {
      const std::string name = "startup-" + kind + suffix;
      const Comparison c = compare(ik_plan(kind), recorded("ik", name), true);
      EXPECT_TRUE(c.findings.empty()) << name << "\n" << dump(c);
      EXPECT_FALSE(c.verified.empty()) << name;
    }
  }
}

TEST(IkVerify, CrashedStartIsAnErrorQuotingTheEngine) {
  const Comparison alone = inspect_facts(recorded("ik", "crash-bf16.log"), true);
  const Finding* crash = find(alone, "engine_crashed");
  ASSERT_TRUE(crash) << dump(alone);
  EXPECT_EQ(crash->severity, Severity::kError);
  EXPECT_NE(
      crash->message.find("K cache bf16 coupled with V cache bf16 is not a supported combination on the CPU "
                          "backend"),
      std::string::npos)
      << crash->message;
  EXPECT_NE(crash->message.find("Fatal error"), std::string::npos) << crash->message;
  EXPECT_EQ(crash->message.find("Inferior"), std::string::npos) << crash->message;
  EXPECT_FALSE(find(alone, "engine_error")) << "one finding for one failure";

  plan::ServerSettings bf16 = recorded_settings();
  bf16.cache_type_k = bf16.cache_type_v = "bf16";
  auto model = testing::describe_synth(gguf::find_synth_preset("tiny-qwen3")->spec);
  ASSERT_TRUE(model.ok());
  auto p = plan::plan_memory(*model, bf16, {.fork = plan::Fork::kIk, .has_accelerator = false});
  if (p.ok()) {  // a planner that refuses bf16 for this build never launches it
    const Comparison planned =
        compare(expectation_from_plan(*p, bf16), recorded("ik", "crash-bf16.log"), true);
    EXPECT_TRUE(find(planned, "engine_crashed")) << dump(planned);
  }

  const Comparison assert_crash = inspect_facts(recorded("ik", "crash-q8_KV.log"), true);
  ASSERT_TRUE(find(assert_crash, "engine_crashed")) << dump(assert_crash);
  EXPECT_NE(find(assert_crash, "engine_crashed")->message.find("GGML_ASSERT(view_src == NULL"),
            std::string::npos);
}

TEST(IkVerify, FailedLoadNamesTheCause) {
  const Comparison c = inspect_facts(recorded("ik", "crash-f32-no-fa.log"), true);
  const Finding* e = find(c, "engine_error");
  ASSERT_TRUE(e) << dump(c);
  EXPECT_EQ(e->message.find(
                "the engine reported an error and did not finish loading: llama_init_from_model: V cache "
                "quantization requires flash_attn"),
            0u)
      << e->message;
  EXPECT_FALSE(find(c, "engine_crashed")) << "it exited 1 without a crash";
}

TEST(IkVerify, ContextSmallerHintNamesOnlyTheForksFlags) {
  plan::ServerSettings bigger = recorded_settings();
  bigger.ctx = 16384;
  const Comparison ik =
      compare(expectation_from_settings(bigger, plan::Fork::kIk), recorded("ik", "startup-qwen3.log"), true);
  const Finding* ik_small = find(ik, "context_smaller");
  ASSERT_TRUE(ik_small) << dump(ik);
  EXPECT_EQ(ik_small->message.find("-fit"), std::string::npos) << "ik rejects -fit: " << ik_small->message;
  EXPECT_NE(ik_small->message.find("check -c"), std::string::npos) << ik_small->message;

  plan::ServerSettings mainline;
  mainline.ctx = 8192;
  mainline.parallel = 2;
  const Comparison ml = compare(expectation_from_settings(mainline, plan::Fork::kMainline),
                                recorded("logs", "pinned_qwen35_np2_q8_0_lv4.log"), true);
  const Finding* ml_small = find(ml, "context_smaller");
  ASSERT_TRUE(ml_small) << dump(ml);
  EXPECT_NE(ml_small->message.find("pass -fit off"), std::string::npos) << ml_small->message;
}

}  // namespace
}  // namespace kvgate::engine
