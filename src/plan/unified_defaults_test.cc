// Unified-memory host-cache defaults: the rule by hand, and what plan_memory and fit do with it.
#include "plan/unified_defaults.h"

#include <gtest/gtest.h>

#include "gguf/synth.h"
#include "plan/fit.h"
#include "plan/memory_model.h"
#include "testing/test_models.h"

namespace kvgate::plan {
namespace {

constexpr uint64_t kMiB = 1ULL << 20;
constexpr uint64_t kGiB = 1ULL << 30;

TEST(UnifiedDefaults, TheRuleByHand) {
  // 12 GiB free, a 150 MiB checkpoint, one slot: checkpoints ⌊3072 / 150⌋ = 20 → capped at 8
  // (1200 MiB); prompt cache ¼ of 11088 MiB = 2772 → 2560 MiB in 256 MiB steps.
  UnifiedDefaults d =
      unified_host_defaults({.free_bytes = int64_t{12} * kGiB, .checkpoint_bytes = 150 * kMiB});
  EXPECT_EQ(d.ctx_checkpoints, 8u);
  EXPECT_EQ(d.cache_ram_mib, 2560u);
  // Plenty of room and no checkpoints needed: the engine's 8192 MiB at most.
  d = unified_host_defaults({.free_bytes = int64_t{100} * kGiB});
  EXPECT_FALSE(d.ctx_checkpoints);
  EXPECT_EQ(d.cache_ram_mib, 8192u);
  // 1000 MiB free, two slots: ⌊250 / 300⌋ = 0 → the minimum 1 per slot (300 MiB); the prompt
  // cache would be ¼ of 700 MiB = 175 → 0.
  d = unified_host_defaults({.free_bytes = int64_t{1000} * kMiB, .checkpoint_bytes = 150 * kMiB, .slots = 2});
  EXPECT_EQ(d.ctx_checkpoints, 1u);
  EXPECT_EQ(d.cache_ram_mib, 0u);
  // Nothing left: no prompt cache, one checkpoint.
  d = unified_host_defaults({.free_bytes = -int64_t{kGiB}, .checkpoint_bytes = 150 * kMiB});
  EXPECT_EQ(d.ctx_checkpoints, 1u);
  EXPECT_EQ(d.cache_ram_mib, 0u);
  // ik keeps one full slot state whatever -cram says: 4761 MiB > the 2560 MiB share → off.
  d = unified_host_defaults(
      {.free_bytes = int64_t{12} * kGiB, .checkpoint_bytes = 150 * kMiB, .ik_entry_bytes = 4761 * kMiB});
  EXPECT_EQ(d.cache_ram_mib, 0u);
  EXPECT_TRUE(d.ik_cache_off);
}

class UnifiedPlan : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = testing::describe_synth(gguf::find_synth_preset("qwen35-27b")->spec,
                                     {.weights = find_quant_recipe("Q3_K_M")});
    ASSERT_TRUE(m.ok()) << m.error().message();
    model_ = *m;
    settings_.ctx = 262144;
    settings_.cache_type_k = settings_.cache_type_v = "q4_0";
    settings_.flash_attn = FlashAttn::kOn;
    settings_.n_gpu_layers = -1;
  }
  PlanOptions unified(uint64_t budget) const {
    return {.fork = Fork::kIk, .unified_memory = true, .memory_budget = budget};
  }
  ModelDescriptor model_;
  ServerSettings settings_;
};

TEST_F(UnifiedPlan, WithoutTheOptionNothingChanges) {
  auto p = plan_memory(model_, settings_, {.fork = Fork::kIk, .memory_budget = 32 * kGiB});
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->sized);
  // ik at 256K: a full slot state (KV 4608 MiB + one sequence's recurrent rows) is below the
  // 8192 MiB limit, so the bill is the limit; checkpoints min(32, 262144 / 512 + 1) = 32.
  EXPECT_EQ(p->prompt_cache_host, 8192 * kMiB);
  const uint64_t one = p->recurrent->bytes() / p->recurrent->rows;
  EXPECT_EQ(p->checkpoints_host, 32 * one);
}

TEST_F(UnifiedPlan, SizedFromWhatIsLeftAndPassedToTheServer) {
  auto p = plan_memory(model_, settings_, unified(32 * kGiB));
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(p->sized);
  const int64_t free = p->sized->free_bytes;
  EXPECT_GT(free, 0);
  ASSERT_TRUE(p->sized->ctx_checkpoints);
  const uint32_t n = *p->sized->ctx_checkpoints;
  EXPECT_GE(n, 1u);
  EXPECT_LE(n, 8u);
  const uint64_t one = p->recurrent->bytes() / p->recurrent->rows;
  EXPECT_EQ(p->checkpoints_host, n * one);
  EXPECT_LE(p->checkpoints_host, static_cast<uint64_t>(free) / 4 + one);
  EXPECT_LE(p->prompt_cache_host, (static_cast<uint64_t>(free) - p->checkpoints_host) / 4);
  EXPECT_EQ(p->prompt_cache_host % (256 * kMiB), 0u);
  EXPECT_LE(p->total(), 32 * kGiB);
  const ServerSettings launched = with_sized_defaults(settings_, *p);
  EXPECT_EQ(launched.ctx_checkpoints, n);
  EXPECT_EQ(launched.cache_ram_mib, p->prompt_cache_host / kMiB);
}

TEST_F(UnifiedPlan, ExplicitFlagsWin) {
  ServerSettings s = settings_;
  s.cache_ram_mib = 512;
  s.ctx_checkpoints = 3;
  auto p = plan_memory(model_, s, unified(32 * kGiB));
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->sized);
  EXPECT_EQ(p->prompt_cache_host, std::max<uint64_t>(512 * kMiB, sequence_state_bytes(*p, p->n_ctx_slot)))
      << "ik bills at least one full slot state";
  EXPECT_EQ(p->checkpoints_host, 3 * (p->recurrent->bytes() / p->recurrent->rows));
}

// --fit on unified memory: the context is maximised first; at the largest context the host
// caches are at their minimum (prompt cache 0, one checkpoint), and one step more does not
// fit even with those minimums.
TEST_F(UnifiedPlan, FitGivesUpHostCachesBeforeContext) {
  const uint64_t budget = 17 * kGiB;  // too small for 256K next to ~12.4 GiB of weights and compute
  auto f = fit(model_, settings_, unified(budget), {.budget = budget});
  ASSERT_TRUE(f.ok()) << f.error().message();
  EXPECT_LT(f->max_ctx, 262144u);
  EXPECT_LE(f->plan.total(), budget);
  ASSERT_TRUE(f->plan.sized);
  EXPECT_EQ(f->plan.sized->cache_ram_mib, 0u);
  EXPECT_EQ(f->plan.sized->ctx_checkpoints, 1u);
  ServerSettings more = with_sized_defaults(f->settings, f->plan);
  more.ctx = f->max_ctx + 256;
  auto bigger = plan_memory(model_, more, unified(budget));
  ASSERT_TRUE(bigger.ok());
  EXPECT_GT(bigger->total(), budget);
  // With room for 256K the context is the target and the caches get their shares: on ik the
  // prompt cache stays off (a 256K slot state is larger than its share), mainline gets one.
  auto roomy = fit(model_, settings_, unified(32 * kGiB), {.budget = 32 * kGiB, .target_ctx = 262144});
  ASSERT_TRUE(roomy.ok());
  EXPECT_EQ(roomy->settings.ctx, 262144u);
  EXPECT_GT(roomy->plan.sized->ctx_checkpoints.value_or(0), 1u);
  EXPECT_EQ(roomy->plan.prompt_cache_host, 0u);
  PlanOptions mainline = unified(32 * kGiB);
  mainline.fork = Fork::kMainline;
  auto main_fit = fit(model_, settings_, mainline, {.budget = 32 * kGiB, .target_ctx = 262144});
  ASSERT_TRUE(main_fit.ok());
  EXPECT_EQ(main_fit->settings.ctx, 262144u);
  EXPECT_GT(main_fit->plan.prompt_cache_host, 0u);
}

}  // namespace
}  // namespace kvgate::plan
