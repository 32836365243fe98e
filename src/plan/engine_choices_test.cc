#include "plan/engine_choices.h"

#include <gtest/gtest.h>

#include "plan/engine_quirks.h"
#include "testing/probe_fixtures.h"

namespace kvgate::plan {
namespace {

// The caps of the real builds, from their recorded probes: mainline has --cache-reuse and
// --slot-save-path; ik has no --cache-reuse.
using testing::fixture_caps;

MemoryPlan plan_with(std::initializer_list<CacheRole> roles, bool recurrent = false) {
  MemoryPlan p;
  for (CacheRole r : roles) p.caches.push_back({.role = r});
  if (recurrent) p.recurrent = RecurrentBill{};
  return p;
}

TEST(EngineChoicesTest, EveryLayerOnTheGpuOnlyWhereTheBuildCanOffload) {
  ServerCaps caps = fixture_caps("mainline");
  caps.gpu_offload = false;
  EXPECT_EQ(default_gpu_layers(caps), 0);
  caps.gpu_offload = true;
  EXPECT_EQ(default_gpu_layers(caps), -1);
}

TEST(EngineChoicesTest, ChunkReuseForAttentionOnlyModelsOnBuildsThatShift) {
  const ServerCaps mainline = fixture_caps("mainline");
  const MemoryPlan attention = plan_with({CacheRole::kMain});
  const ServerSettings chosen = choose_engine_settings({}, mainline, attention);
  EXPECT_EQ(chosen.cache_reuse, 256u);
  EXPECT_TRUE(shifts_cached_chunks(chosen, attention));

  // Sliding-window, indexer and recurrent state cannot shift.
  for (const MemoryPlan& p : {plan_with({CacheRole::kMain, CacheRole::kSwa}),
                              plan_with({CacheRole::kMain, CacheRole::kIndexer}),
                              plan_with({CacheRole::kMain}, /*recurrent=*/true), plan_with({}, true)}) {
    EXPECT_FALSE(attention_only(p));
    const ServerSettings s = choose_engine_settings({}, mainline, p);
    EXPECT_FALSE(s.cache_reuse);
    EXPECT_FALSE(shifts_cached_chunks(s, p));
  }
  // ik_llama.cpp has no --cache-reuse.
  const ServerSettings ik = choose_engine_settings({}, fixture_caps("ik"), attention);
  EXPECT_FALSE(ik.cache_reuse);
  EXPECT_FALSE(shifts_cached_chunks(ik, attention));
}

TEST(EngineChoicesTest, WhatTheUserSetIsKept) {
  const ServerCaps mainline = fixture_caps("mainline");
  const MemoryPlan attention = plan_with({CacheRole::kMain});
  ServerSettings off;
  off.cache_reuse = 0;
  EXPECT_EQ(choose_engine_settings(off, mainline, attention).cache_reuse, 0u);
  EXPECT_FALSE(shifts_cached_chunks(off, attention));
  ServerSettings larger;
  larger.cache_reuse = 1024;
  EXPECT_EQ(choose_engine_settings(larger, mainline, attention).cache_reuse, 1024u);
  // Given for a recurrent model, it is passed, but nothing shifts.
  EXPECT_FALSE(shifts_cached_chunks(larger, plan_with({CacheRole::kMain}, true)));
}

TEST(EngineChoicesTest, UnifiedMemorySizingAndForkSettingsAreApplied) {
  MemoryPlan hybrid = plan_with({CacheRole::kMain}, /*recurrent=*/true);
  hybrid.sized = HostCacheSizing{.cache_ram_mib = 1024, .ctx_checkpoints = 2};
  const ServerSettings ik = choose_engine_settings({}, fixture_caps("ik"), hybrid);
  EXPECT_EQ(ik.cache_ram_mib, 1024u);
  EXPECT_EQ(ik.ctx_checkpoints, 2u);
  EXPECT_EQ(ik.ctx_checkpoint_tolerance, kCheckpointTolerance);
  ServerSettings given;
  given.cache_ram_mib = 0;
  const ServerSettings mainline = choose_engine_settings(given, fixture_caps("mainline"), hybrid);
  EXPECT_EQ(mainline.cache_ram_mib, 0u);
  EXPECT_EQ(mainline.ctx_checkpoints, 2u);
  EXPECT_FALSE(mainline.ctx_checkpoint_tolerance);  // mainline has no -ctx-ckpt-t
}

TEST(EngineChoicesTest, SavedStateTakesAShareOfTheFreeDisk) {
  const ServerCaps mainline = fixture_caps("mainline");
  constexpr uint64_t GiB = 1ull << 30;
  auto with_free = [&](uint64_t free, uint32_t share) {
    return choose_saved_state(mainline, {.free_bytes = free, .free_share = share, .where = "/state"});
  };
  EXPECT_EQ(with_free(100 * GiB, 10).disk_budget_bytes, 10 * GiB);
  EXPECT_EQ(with_free(100 * GiB, 2).disk_budget_bytes, 50 * GiB);
  EXPECT_EQ(with_free(10000 * GiB, 10).disk_budget_bytes, 64 * GiB);  // capped
  const SavedStateChoice little = with_free(600ull << 20, 10);
  EXPECT_FALSE(little.enabled());
  EXPECT_EQ(little.off_because, "less than 640 MiB free in /state");
  EXPECT_EQ(with_free(100ull << 20, 2).off_because, "less than 128 MiB free in /state");
  EXPECT_FALSE(with_free(0, 10).enabled());  // free space unknown

  // What the user gives is taken as is; 0 turns it off without a reason to report.
  EXPECT_EQ(choose_saved_state(mainline, {.disk_bytes = 1ull << 20}).disk_budget_bytes, 1ull << 20);
  const SavedStateChoice off = choose_saved_state(mainline, {.disk_bytes = 0, .free_bytes = 100 * GiB});
  EXPECT_FALSE(off.enabled());
  EXPECT_EQ(off.off_because, "");
}

TEST(EngineChoicesTest, NoSavedStateWhereTheBuildCannotBeTrustedWithIt) {
  const SavedStateRequest plenty{.disk_bytes = std::nullopt, .free_bytes = 100ull << 30, .where = "/state"};
  const SavedStateChoice ik = choose_saved_state(fixture_caps("ik"), plenty);
  EXPECT_FALSE(ik.enabled());
  EXPECT_NE(ik.off_because.find("ik_llama.cpp"), std::string::npos) << ik.off_because;
  ServerCaps no_flag = fixture_caps("mainline");
  no_flag.help_flags.erase("--slot-save-path");
  const SavedStateChoice none = choose_saved_state(no_flag, {.disk_bytes = 1ull << 30});
  EXPECT_FALSE(none.enabled());
  EXPECT_NE(none.off_because.find("has no --slot-save-path"), std::string::npos) << none.off_because;
}

}  // namespace
}  // namespace kvgate::plan
