#include "engine/verify.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "gguf/synth.h"
#include "plan/model_desc.h"
#include "testing/paths.h"
#include "testing/test_models.h"

namespace kvgate::engine {
namespace {

std::string fixture(const std::string& name) {
  std::ifstream in(std::string(kvgate::testing::source_dir()) + "/tests/fixtures/logs/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

bool has(const Comparison& c, std::string_view code, Severity s = Severity::kError) {
  return std::any_of(c.findings.begin(), c.findings.end(),
                     [&](const Finding& f) { return f.code == code && f.severity == s; });
}

std::string dump(const Comparison& c) {
  std::string out;
  for (const auto& f : c.findings) out += std::string(severity_name(f.severity)) + " " + f.code + ": " + f.message + "\n";
  return out;
}

plan::ModelDescriptor preset(std::string_view name) {
  auto m = testing::describe_synth(gguf::find_synth_preset(name)->spec);
  EXPECT_TRUE(m.ok()) << m.error().message();
  return *m;
}

Expectation planned(const plan::ModelDescriptor& m, const plan::ServerSettings& s, plan::PlanOptions o = {}) {
  auto p = plan::plan_memory(m, s, o);
  EXPECT_TRUE(p.ok()) << p.error().message();
  return expectation_from_plan(*p, s);
}

plan::ServerSettings qwen35_settings() {
  plan::ServerSettings s;
  s.ctx = 131072;
  s.parallel = 4;
  s.kv_unified = true;
  s.cache_type_k = s.cache_type_v = "q8_0";
  s.n_gpu_layers = -1;
  return s;
}

Comparison check(const Expectation& e, const std::string& log) {
  return compare(e, parse_startup_log(fixture(log)), true);
}

TEST(Verify, Qwen35OnCudaMatchesThePlan) {
  Comparison c = check(planned(preset("qwen35-27b"), qwen35_settings()), "mainline_qwen35_27b_cuda.log");
  EXPECT_FALSE(c.has_errors()) << dump(c);
  // That build reserved logits for every ubatch token: above the estimate, a warning only.
  EXPECT_TRUE(has(c, "compute_above_estimate", Severity::kWarning)) << dump(c);
  EXPECT_TRUE(std::any_of(c.verified.begin(), c.verified.end(),
                          [](const std::string& v) { return v.find("4352.00 MiB") != std::string::npos; }));
  EXPECT_TRUE(std::any_of(c.verified.begin(), c.verified.end(),
                          [](const std::string& v) { return v.find("recurrent state: 598.50") != std::string::npos; }));
}

TEST(Verify, EveryMismatchIsANamedFinding) {
  plan::ServerSettings s;
  s.ctx = 32768;
  s.cache_type_k = s.cache_type_v = "q8_0";
  s.n_gpu_layers = -1;
  Comparison c = check(planned(preset("gemma3-27b"), s), "mainline_gemma3_27b_mismatch.log");
  EXPECT_TRUE(c.has_errors());
  for (auto code : {"context_smaller", "slot_context_smaller", "kv_type_mismatch", "fewer_cells",
                    "kv_smaller_than_planned", "partial_offload"}) {
    EXPECT_TRUE(has(c, code)) << code << "\n" << dump(c);
  }
  // The SWA cache has the planned 1536 cells: no cell finding names it.
  for (const auto& f : c.findings) {
    if (f.code == "fewer_cells") {
      EXPECT_EQ(f.message.find("sliding-window"), std::string::npos) << f.message;
    }
  }
}

TEST(Verify, SettingsOnlyStillCatchesTypeAndContext) {
  plan::ServerSettings s;
  s.ctx = 32768;
  s.cache_type_k = s.cache_type_v = "q8_0";
  s.n_gpu_layers = -1;
  Comparison c = check(expectation_from_settings(s, plan::Fork::kMainline), "mainline_gemma3_27b_mismatch.log");
  EXPECT_TRUE(has(c, "context_smaller")) << dump(c);
  EXPECT_TRUE(has(c, "kv_type_mismatch")) << dump(c);
  EXPECT_TRUE(has(c, "partial_offload")) << dump(c);
  EXPECT_FALSE(has(c, "kv_smaller_than_planned")) << "no sizes without a model";
}

TEST(Verify, PinnedEngineLogMatchesItsPlan) {
  auto m = testing::describe_synth(*gguf::synth_defaults("qwen35"));
  ASSERT_TRUE(m.ok());
  plan::ServerSettings s;
  s.ctx = 4096;
  s.parallel = 2;
  s.cache_type_k = s.cache_type_v = "q8_0";
  s.flash_attn = plan::FlashAttn::kOn;
  Comparison c = check(planned(*m, s, {.has_accelerator = false}), "pinned_qwen35_np2_q8_0_lv4.log");
  EXPECT_TRUE(c.findings.empty()) << dump(c);
  EXPECT_GE(c.verified.size(), 5u);
}

TEST(Verify, IkLogs) {
  auto qwen3 = testing::MetaModel("qwen3moe")
                   .u32("block_count", 94)
                   .u32("embedding_length", 4096)
                   .u32("attention.head_count", 64)
                   .u32("attention.head_count_kv", 4)
                   .u32("attention.key_length", 128)
                   .u32("attention.value_length", 128)
                   .u32("context_length", 40960)
                   .describe();
  ASSERT_TRUE(qwen3.ok());
  plan::ServerSettings s;
  s.ctx = 32768;
  s.cache_type_k = s.cache_type_v = "q8_0";
  s.n_gpu_layers = -1;
  Comparison ok = check(planned(*qwen3, s, {.fork = plan::Fork::kIk}), "ik_qwen3_235b.log");
  EXPECT_FALSE(ok.has_errors()) << dump(ok);
  s.cache_type_k = s.cache_type_v = "q4_0";
  Comparison bad = check(planned(*qwen3, s, {.fork = plan::Fork::kIk}), "ik_qwen3_235b.log");
  EXPECT_TRUE(has(bad, "kv_type_mismatch")) << dump(bad);
  EXPECT_TRUE(has(bad, "kv_larger_than_planned")) << dump(bad);

  auto ds = testing::MetaModel("deepseek2")
                .u32("block_count", 61)
                .u32("embedding_length", 7168)
                .u32("attention.head_count", 128)
                .u32("attention.head_count_kv", 1)
                .u32("attention.key_length", 576)
                .u32("attention.value_length", 512)
                .u32("attention.key_length_mla", 192)
                .u32("attention.value_length_mla", 128)
                .u32("attention.kv_lora_rank", 512)
                .u32("rope.dimension_count", 64)
                .u32("context_length", 163840)
                .describe();
  ASSERT_TRUE(ds.ok());
  s.cache_type_k = s.cache_type_v = "q8_0";
  Comparison mla = check(planned(*ds, s, {.fork = plan::Fork::kIk}), "ik_deepseek_v3_mla.log");
  EXPECT_FALSE(mla.has_errors()) << dump(mla);
}

TEST(Verify, FactsAlone) {
  Comparison capped = inspect_facts(parse_startup_log(fixture("mainline_capped_by_training_context.log")), true);
  EXPECT_TRUE(has(capped, "slot_capped_by_training_context", Severity::kWarning)) << dump(capped);
  EXPECT_FALSE(capped.has_errors());
  Comparison lv3 = inspect_facts(parse_startup_log(fixture("pinned_qwen35_np2_lv3.log")), true);
  EXPECT_TRUE(has(lv3, "no_allocation_lines")) << dump(lv3);
  Comparison broken = inspect_facts(parse_startup_log(fixture("mainline_load_error.log")), true);
  EXPECT_TRUE(has(broken, "engine_error")) << dump(broken);
  Comparison partial = inspect_facts(parse_startup_log(fixture("mainline_gemma3_27b_mismatch.log")), true);
  EXPECT_TRUE(has(partial, "partial_offload", Severity::kWarning));
}

TEST(Verify, CapPredictedByThePlanIsInformational) {
  gguf::SynthSpec spec = *gguf::synth_defaults("qwen3");
  spec.ctx_train = 32768;
  auto m = testing::describe_synth(spec);
  plan::ServerSettings s;
  s.ctx = 65536;
  Expectation e = planned(*m, s, {.has_accelerator = false});
  EXPECT_TRUE(e.slot_capped);
  Comparison c = check(e, "mainline_capped_by_training_context.log");
  EXPECT_TRUE(has(c, "slot_capped_by_training_context", Severity::kInfo)) << dump(c);
}

// The supervisor's use: lines arrive one by one; nothing is reported missing before the
// log is complete, and finish() on a cut-short log names what never came.
TEST(Verify, IncrementalFeeding) {
  StartupVerifier v(planned(preset("qwen35-27b"), qwen35_settings()));
  const auto lines = lines_of(fixture("mainline_qwen35_27b_cuda.log"));
  size_t complete_at = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    v.feed(lines[i]);
    const Comparison now = v.findings();
    EXPECT_FALSE(has(now, "kv_cache_missing")) << "line " << i;
    EXPECT_FALSE(has(now, "recurrent_missing")) << "line " << i;
    if (v.complete() && complete_at == 0) complete_at = i + 1;
  }
  EXPECT_GT(complete_at, 0u);
  EXPECT_NE(lines[complete_at - 1].find("initializing, n_slots"), std::string::npos) << lines[complete_at - 1];
  EXPECT_FALSE(v.finish().has_errors()) << dump(v.finish());

  StartupVerifier cut(planned(preset("qwen35-27b"), qwen35_settings()));
  for (size_t i = 0; i < 18; ++i) cut.feed(lines[i]);
  EXPECT_FALSE(cut.complete());
  const Comparison end = cut.finish();
  EXPECT_TRUE(has(end, "kv_cache_missing")) << dump(end);
  EXPECT_TRUE(has(end, "recurrent_missing")) << dump(end);
}

}  // namespace
}  // namespace kvgate::engine
