#include "plan/engine_quirks.h"

#include <gtest/gtest.h>

#include "testing/probe_fixtures.h"

namespace kvgate::plan {
namespace {

// The caps of the real builds, from their recorded probes.
using testing::fixture_caps;

// The pairs below were each started on ik 8337e4cd3's CPU build (tests/fixtures/ik/): the
// ones marked false abort at load.
TEST(EngineQuirksTest, IkCpuBackendCachePairs) {
  const ServerCaps ik = fixture_caps("ik");
  ASSERT_FALSE(ik.gpu_offload);
  struct Case {
    const char* k;
    const char* v;
    FlashAttn fa;
    bool runs;
  };
  const Case cases[] = {
      {"f16", "f16", FlashAttn::kOn, true},      {"q8_0", "q8_0", FlashAttn::kAuto, true},
      {"q6_0", "q4_0", FlashAttn::kOn, true},    {"q8_KV", "f16", FlashAttn::kOn, true},
      {"iq4_nl", "q6_0", FlashAttn::kOn, true},  {"bf16", "bf16", FlashAttn::kOn, false},
      {"bf16", "bf16", FlashAttn::kAuto, false}, {"f32", "f32", FlashAttn::kOn, false},
      {"f16", "bf16", FlashAttn::kOn, false},    {"q5_0", "q5_0", FlashAttn::kOn, false},
      {"q5_1", "f16", FlashAttn::kOn, false},    {"q8_0", "q8_KV", FlashAttn::kOn, false},
      {"bf16", "bf16", FlashAttn::kOff, true},   {"q8_KV", "f16", FlashAttn::kOff, true},
      {"f32", "f16", FlashAttn::kOff, true},     {"f32", "f32", FlashAttn::kOff, false},
      {"f16", "q8_0", FlashAttn::kOff, false},
  };
  for (const auto& c : cases) {
    auto st = check_cache_pair(ik, c.k, c.v, c.fa);
    EXPECT_EQ(st.ok(), c.runs) << c.k << "/" << c.v << " fa " << static_cast<int>(c.fa)
                               << (st.ok() ? "" : ": " + st.error().message());
  }
  auto st = check_cache_pair(ik, "bf16", "bf16", FlashAttn::kOn);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("CPU backend"), std::string::npos) << st.error().message();
  EXPECT_NE(st.error().message().find("--ctk q8_0"), std::string::npos) << st.error().message();
}

TEST(EngineQuirksTest, MainlineAndGpuBuildsAreNotRestricted) {
  const ServerCaps mainline = fixture_caps("mainline");
  EXPECT_TRUE(check_cache_pair(mainline, "bf16", "bf16", FlashAttn::kOn).ok());
  ServerCaps ik_gpu = fixture_caps("ik");
  ik_gpu.gpu_offload = true;  // nothing measured against a GPU backend
  EXPECT_TRUE(check_cache_pair(ik_gpu, "bf16", "bf16", FlashAttn::kOn).ok());
}

TEST(EngineQuirksTest, CheckpointToleranceChosenForRecurrentModelsOnIk) {
  const ServerCaps ik = fixture_caps("ik");
  ServerSettings s;
  choose_fork_settings(ik, /*recurrent=*/false, s);
  EXPECT_FALSE(s.ctx_checkpoint_tolerance);
  choose_fork_settings(ik, /*recurrent=*/true, s);
  EXPECT_EQ(s.ctx_checkpoint_tolerance, kCheckpointTolerance);
  EXPECT_GT(kCheckpointTolerance, kIkDefaultCheckpointTolerance);
  ServerSettings given;
  given.ctx_checkpoint_tolerance = 3;
  choose_fork_settings(ik, true, given);
  EXPECT_EQ(given.ctx_checkpoint_tolerance, 3u);  // the user's value stays
  ServerSettings m;
  choose_fork_settings(fixture_caps("mainline"), true, m);
  EXPECT_FALSE(m.ctx_checkpoint_tolerance);  // mainline has no such flag
}

TEST(EngineQuirksTest, FinishReasonAtMaxTokens) {
  EXPECT_TRUE(says_stop_at_max_tokens(Fork::kIk));
  EXPECT_FALSE(says_stop_at_max_tokens(Fork::kMainline));
}

}  // namespace
}  // namespace kvgate::plan
