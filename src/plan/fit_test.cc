#include "plan/fit.h"

#include <gtest/gtest.h>

#include "gguf/synth.h"
#include "plan/capacity.h"
#include "testing/test_models.h"

namespace kvgate::plan {
namespace {

ModelDescriptor seed_model() {
  auto m = testing::describe_synth(gguf::find_synth_preset("qwen3-48l")->spec);
  EXPECT_TRUE(m.ok());
  return *m;
}

ServerSettings base() {
  ServerSettings s;
  s.parallel = 1;
  s.n_gpu_layers = -1;
  s.cache_ram_mib = 0;
  return s;
}

TEST(Fit, LargestContextIsTheEdgeOfTheBudget) {
  ModelDescriptor m = seed_model();
  ServerSettings s = base();
  s.cache_type_k = s.cache_type_v = "q4_0";
  s.ctx = 65536;
  auto at = plan_memory(m, s, {});
  ASSERT_TRUE(at.ok());
  auto r = fit(m, s, {}, {.budget = at->total()});
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->max_ctx, 65536u);
  EXPECT_EQ(r->settings.ctx, 65536u);
  auto tighter = fit(m, s, {}, {.budget = at->total() - 1});
  EXPECT_EQ(tighter->max_ctx, 65536u - 256);
  EXPECT_LE(tighter->plan.total(), at->total() - 1);
}

TEST(Fit, AutoTypePrefersPrecision) {
  ModelDescriptor m = seed_model();
  ServerSettings s = base();
  s.ctx = 262144;
  s.cache_type_k = s.cache_type_v = "q8_0";
  auto q8 = plan_memory(m, s, {});
  // Budget for q8_0 at 256K: f16 cannot reach it, q8_0 can.
  auto r = fit(m, s, {}, {.budget = q8->total(), .auto_type = true, .target_ctx = 262144});
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->settings.cache_type_k, "q8_0");
  EXPECT_EQ(r->settings.ctx, 262144u);
  EXPECT_EQ(r->trials.front().type, "f16");
  EXPECT_LT(r->trials.front().max_ctx, 262144u);
  // A smaller target fits in f16.
  auto small = fit(m, s, {}, {.budget = q8->total(), .auto_type = true, .target_ctx = 32768});
  EXPECT_EQ(small->settings.cache_type_k, "f16");
}

TEST(Fit, NothingFitsIsAnError) {
  ModelDescriptor m = seed_model();
  auto r = fit(m, base(), {}, {.budget = 1 << 20});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("nothing fits"), std::string::npos);
  EXPECT_FALSE(fit(m, base(), {}, {}).ok()) << "no budget";
}

TEST(Fit, SafeCapAndCapacity) {
  EXPECT_EQ(safe_cap(65536), 49152u);
  EXPECT_EQ(safe_cap(1000), 512u);
  auto c = text_capacity(262144);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].chars_low, 1048576u);
  EXPECT_EQ(c[1].chars_low, 155975u);  // 262144 × 0.595
}

}  // namespace
}  // namespace kvgate::plan
