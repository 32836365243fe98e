// Exactness against the real engine: for every architecture `kvgate synth` writes, several
// dimension sets (GQA, MQA, hybrid intervals, window patterns), the planner's KV and
// recurrent-state figures equal what the pinned llama-server logs, to the byte as far as
// the log shows it (two decimals of MiB, the engine's own float rounding), together with
// cells, layers, seqs/streams and types. Settings vary context, slots (1, 3, 4), unified
// and per-slot KV, f16/q8_0/q4_0 for K and V, mixed K ≠ V, flash attention off, --swa-full.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "engine/startup_log.h"
#include "gguf/file.h"
#include "plan/memory_model.h"
#include "plan/model_desc.h"
#include "testing/engine_e2e.h"

namespace kvgate::engine {
namespace {

// The engine prints `(float)bytes / (1024.0f * 1024.0f)` with %7.2f.
std::string engine_mib(uint64_t bytes) {
  return fmt::format("{:.2f}", static_cast<double>(static_cast<float>(bytes) / (1024.0F * 1024.0F)));
}
std::string logged(double mib) { return fmt::format("{:.2f}", mib); }

struct EngineArgs {
  uint32_t ctx;
  uint32_t np;
  std::optional<bool> unified;
  const char* k;
  const char* v;
  bool fa = true;
  bool swa_full = false;
};

std::string describe(const EngineArgs& r) {
  return fmt::format("-c {} -np {}{} -ctk {} -ctv {} -fa {}{}", r.ctx, r.np,
                     r.unified ? (*r.unified ? " -kvu" : " -no-kvu") : "", r.k, r.v, r.fa ? "on" : "off",
                     r.swa_full ? " --swa-full" : "");
}

std::vector<EngineArgs> runs(bool swa) {
  std::vector<EngineArgs> out = {
      {1024, 1, std::nullopt, "f16", "f16"},
      {3000, 1, std::nullopt, "q8_0", "q8_0"},
      {4096, 4, false, "q4_0", "q4_0"},
      {4096, 4, true, "f16", "f16"},
      {3000, 4, false, "q8_0", "q4_0"},
      {8192, 4, true, "q4_0", "q8_0"},
      {2048, 1, std::nullopt, "f16", "q8_0"},
      {6000, 3, false, "f16", "f16"},
      {5000, 2, true, "q8_0", "f16", false},
  };
  if (swa) out.push_back({4096, 2, true, "f16", "f16", true, true});
  return out;
}

struct ModelCase {
  std::string label;
  gguf::SynthSpec spec;
};

void PrintTo(const ModelCase& c, std::ostream* os) { *os << c.label; }

std::vector<ModelCase> models() {
  std::vector<ModelCase> out;
  auto add = [&out](std::string label, std::string_view arch, auto tweak) {
    gguf::SynthSpec s = *gguf::synth_defaults(arch);
    tweak(s);
    out.push_back({std::move(label), s});
  };
  add("llama_gqa", "llama", [](gguf::SynthSpec&) {});
  add("llama_mqa", "llama", [](gguf::SynthSpec& s) {
    s.n_head = 8;
    s.n_head_kv = 1;
    s.head_dim = 64;
    s.n_embd = 512;
  });
  add("qwen3_gqa", "qwen3", [](gguf::SynthSpec& s) { s.n_layer = 6; });
  add("qwen3_mqa", "qwen3", [](gguf::SynthSpec& s) {
    s.n_head = 8;
    s.n_head_kv = 1;
    s.head_dim = 64;
  });
  add("qwen35_interval4", "qwen35", [](gguf::SynthSpec&) {});
  add("qwen35_interval2", "qwen35", [](gguf::SynthSpec& s) {
    s.interval = 2;
    s.n_layer = 6;
    s.ssm_state = 16;
    s.ssm_groups = 1;
    s.ssm_dt_rank = 2;
    s.n_head_kv = 1;
  });
  add("gemma3_window256", "gemma3", [](gguf::SynthSpec&) {});
  add("gemma3_window64_pattern3", "gemma3", [](gguf::SynthSpec& s) {
    s.swa_window = 64;
    s.swa_pattern = 3;
    s.n_layer = 7;
    s.n_head_kv = 4;
  });
  return out;
}

class PlanExactnessE2eTest : public ::testing::TestWithParam<ModelCase> {};

TEST_P(PlanExactnessE2eTest, KvAndRecurrentStateMatchTheEngineLog) {
  const ModelCase& mc = GetParam();
  auto model = testing::TempModel::synthesize(mc.spec, mc.label);
  ASSERT_TRUE(model.ok()) << model.error().message();
  auto file = gguf::File::open(model->path());
  ASSERT_TRUE(file.ok());
  auto desc = plan::describe_model(*file);
  ASSERT_TRUE(desc.ok()) << desc.error().message();

  for (const EngineArgs& r : runs(desc->has_swa())) {
    SCOPED_TRACE(describe(r));
    plan::ServerSettings s;
    s.ctx = r.ctx;
    s.parallel = r.np;
    s.kv_unified = r.unified;
    s.cache_type_k = r.k;
    s.cache_type_v = r.v;
    s.flash_attn = r.fa ? plan::FlashAttn::kOn : plan::FlashAttn::kOff;
    s.swa_full = r.swa_full;
    auto p = plan::plan_memory(*desc, s, {.has_accelerator = false});
    ASSERT_TRUE(p.ok()) << p.error().message();

    std::vector<std::string> args = {"-ctk", r.k, "-ctv", r.v, "-fa", r.fa ? "on" : "off"};
    if (r.unified) args.push_back(*r.unified ? "-kvu" : "-no-kvu");
    if (r.swa_full) args.push_back("--swa-full");
    testing::EngineRun run = testing::run_engine(model->path(), r.ctx, static_cast<int>(r.np), args);
    ASSERT_TRUE(run.ready) << run.error;
    StartupLogParser parser;
    for (const auto& line : run.lines) parser.feed(line);
    const StartupFacts& f = parser.facts();

    EXPECT_EQ(f.n_ctx, p->n_ctx);
    EXPECT_EQ(f.n_ctx_seq, p->n_ctx_seq);
    EXPECT_EQ(f.n_seq_max, p->n_seq_max);
    EXPECT_EQ(f.kv_unified, p->kv_unified);
    ASSERT_EQ(f.kv_caches.size(), p->caches.size());
    for (const auto& planned : p->caches) {
      SCOPED_TRACE(plan::cache_role_name(planned.role));
      const KvCacheFact* got = f.kv_cache(planned.role);
      ASSERT_NE(got, nullptr);
      EXPECT_EQ(got->cells, planned.cells);
      EXPECT_EQ(got->layers, planned.layers);
      EXPECT_EQ(got->seqs, planned.seqs);
      EXPECT_EQ(got->streams, planned.streams);
      EXPECT_EQ(got->type_k, planned.type_k);
      EXPECT_EQ(got->type_v, planned.type_v);
      EXPECT_EQ(logged(got->mib), engine_mib(planned.bytes()));
      EXPECT_EQ(logged(got->k_mib), engine_mib(planned.k_bytes));
      EXPECT_EQ(logged(got->v_mib), engine_mib(planned.v_bytes));
      if (got->announced_cells) {
        EXPECT_EQ(*got->announced_cells, planned.cells);
      }
    }
    ASSERT_EQ(f.recurrent.has_value(), p->recurrent.has_value());
    if (p->recurrent) {
      EXPECT_EQ(f.recurrent->cells, p->recurrent->rows);
      EXPECT_EQ(f.recurrent->layers, p->recurrent->logged_layers);
      EXPECT_EQ(f.recurrent->seqs, p->recurrent->seqs);
      EXPECT_EQ(logged(f.recurrent->mib), engine_mib(p->recurrent->bytes()));
      EXPECT_EQ(logged(f.recurrent->r_mib), engine_mib(p->recurrent->r_bytes));
      EXPECT_EQ(logged(f.recurrent->s_mib), engine_mib(p->recurrent->s_bytes));
    }
    // The host output buffer: n_vocab × slots × 4 bytes.
    ASSERT_FALSE(f.output_buffers.empty());
    EXPECT_EQ(logged(f.output_buffers[0].mib), fmt::format("{:.2f}", static_cast<double>(p->output_host) / 1048576.0));
    // All weights in the mapped host buffer (CPU-only engine).
    ASSERT_FALSE(f.model_buffers.empty());
    EXPECT_NEAR(f.model_buffers[0].mib, static_cast<double>(p->weights_host) / 1048576.0, 0.01);
  }
}

INSTANTIATE_TEST_SUITE_P(Architectures, PlanExactnessE2eTest, ::testing::ValuesIn(models()),
                         [](const auto& param_info) { return param_info.param.label; });

}  // namespace
}  // namespace kvgate::engine
