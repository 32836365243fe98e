#include "engine/start_plan.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "gguf/synth.h"
#include "plan/engine_choices.h"
#include "plan/engine_quirks.h"
#include "testing/paths.h"
#include "testing/probe_fixtures.h"
#include "testing/test_models.h"

namespace kvgate::engine {
namespace {

namespace fs = std::filesystem;

device::Facts fixture_device(const std::string& name) {
  return device::read_facts(fs::path(kvgate::testing::source_dir()) / "tests/fixtures/device" / name, std::nullopt);
}

plan::ModelDescriptor model(const std::string& preset) {
  auto m = testing::describe_synth(gguf::find_synth_preset(preset)->spec);
  EXPECT_TRUE(m.ok()) << m.error().message();
  return m.ok() ? *m : plan::ModelDescriptor{};
}

StartRequest request(uint32_t ctx) {
  StartRequest r;
  r.settings.model_path = "/models/m.gguf";
  r.settings.ctx = ctx;
  return r;
}

TEST(StartPlanTest, TheBudgetIsTheOneGivenElseMemAvailableOnUnifiedMemory) {
  const device::Facts orin = fixture_device("orin-agx-32g");
  ASSERT_TRUE(orin.unified_memory);
  const MemoryBudget available = memory_budget(std::nullopt, orin);
  EXPECT_EQ(available.bytes, orin.mem_available);
  EXPECT_EQ(available.source, "MemAvailable");
  const MemoryBudget given = memory_budget(8ull << 30, orin);
  EXPECT_EQ(given.bytes, 8ull << 30);
  EXPECT_EQ(given.source, "--memory");
  // A PC: no budget unless given (a discrete GPU's free memory is not the whole story).
  const MemoryBudget pc = memory_budget(std::nullopt, fixture_device("x86-cpu"));
  EXPECT_FALSE(pc.bytes);
  EXPECT_EQ(pc.source, "");
}

TEST(StartPlanTest, AnAttentionModelOnAPcGetsChunkReuseAndNoBudget) {
  const plan::ServerCaps mainline = testing::fixture_caps("mainline");
  auto start = plan_start(model("tiny-llama"), mainline, fixture_device("x86-cpu"), request(8192));
  ASSERT_TRUE(start.ok()) << start.error().message();
  EXPECT_EQ(start->settings.n_gpu_layers, mainline.gpu_offload ? -1 : 0);
  EXPECT_EQ(start->settings.cache_reuse, plan::kCacheReuseChunk);
  EXPECT_TRUE(start->shifts);
  EXPECT_EQ(start->settings.model_path, "/models/m.gguf");
  EXPECT_EQ(start->memory.n_ctx, 8192u);
  EXPECT_FALSE(start->budget.bytes);
  EXPECT_FALSE(start->over_budget());
  EXPECT_FALSE(start->settings.cache_ram_mib);  // not unified memory: the engine's default
}

TEST(StartPlanTest, AHybridModelOnIkGetsCheckpointsAndNoChunkReuse) {
  auto start = plan_start(model("tiny-qwen35"), testing::fixture_caps("ik"), fixture_device("x86-cpu"), request(4096));
  ASSERT_TRUE(start.ok()) << start.error().message();
  EXPECT_TRUE(start->memory.recurrent);
  EXPECT_FALSE(start->settings.cache_reuse);
  EXPECT_FALSE(start->shifts);
  EXPECT_EQ(start->settings.ctx_checkpoint_tolerance, plan::kCheckpointTolerance);
}

TEST(StartPlanTest, UnifiedMemorySizesTheHostCachesFromTheBudget) {
  plan::ServerCaps caps = testing::fixture_caps("mainline");
  caps.gpu_offload = true;  // a CUDA build on the board
  const device::Facts orin = fixture_device("orin-agx-32g");
  auto start = plan_start(model("tiny-llama"), caps, orin, request(4096));
  ASSERT_TRUE(start.ok()) << start.error().message();
  EXPECT_EQ(start->settings.n_gpu_layers, -1);
  EXPECT_EQ(start->budget.bytes, orin.mem_available);
  ASSERT_TRUE(start->memory.sized);
  EXPECT_EQ(start->settings.cache_ram_mib, start->memory.sized->cache_ram_mib);
  EXPECT_FALSE(start->over_budget());

  StartRequest small = request(4096);
  small.n_gpu_layers = 2;
  small.memory_budget = 64ull << 20;  // below the 1 GiB reserve alone
  auto tight = plan_start(model("tiny-llama"), caps, orin, small);
  ASSERT_TRUE(tight.ok()) << tight.error().message();
  EXPECT_EQ(tight->settings.n_gpu_layers, 2);
  EXPECT_EQ(tight->budget.source, "--memory");
  EXPECT_TRUE(tight->over_budget());
}

TEST(StartPlanTest, SettingsThePlannerRefusesAreAnError) {
  StartRequest r = request(4096);
  r.settings.cache_type_k = "no-such-type";
  EXPECT_FALSE(plan_start(model("tiny-llama"), testing::fixture_caps("mainline"), fixture_device("x86-cpu"), r).ok());
}

}  // namespace
}  // namespace kvgate::engine
