#include "gateway/turn_accounting.h"

#include <gtest/gtest.h>

namespace kvgate::gateway {
namespace {

using session::BreakCause;

TEST(TurnAccountingTest, AnExtendedPromptTheEngineDidNotReuseIsItsBreak) {
  const PrefixReuse lost{.prefix_kept = true, .usage_known = true, .cached_tokens = 10, .previous_tokens = 1000};
  auto b = engine_break(lost);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->cause, BreakCause::kSlotEviction);
  EXPECT_EQ(b->detail, "engine reused 10 of the previous 1000 prompt tokens");
  PrefixReuse restarted = lost;
  restarted.engine_restarted = true;
  EXPECT_EQ(engine_break(restarted)->cause, BreakCause::kEngineRestart);
}

TEST(TurnAccountingTest, NoBreakIsTheEnginesWhenThePromptChangedOrWasReused) {
  PrefixReuse r{.prefix_kept = true, .usage_known = true, .cached_tokens = 900, .previous_tokens = 1000};
  EXPECT_FALSE(engine_break(r));  // 90 % reused
  r.cached_tokens = 899;
  EXPECT_TRUE(engine_break(r));
  r.prefix_kept = false;  // the view changed: kvgate or the client named the cause
  EXPECT_FALSE(engine_break(r));
  r = {.prefix_kept = true, .usage_known = false, .cached_tokens = 0, .previous_tokens = 1000};
  EXPECT_FALSE(engine_break(r));  // no figures
  r = {.prefix_kept = true, .usage_known = true, .cached_tokens = 0, .previous_tokens = 64};
  EXPECT_FALSE(engine_break(r));  // too short to judge
}

TEST(TurnAccountingTest, TheRecordTakesTheEnginesFigures) {
  RequestRecord rec;
  record_usage(rec, {.prompt_tokens = 100, .cached_tokens = 60, .prefilled_tokens = 40, .completion_tokens = 7});
  EXPECT_EQ(rec.prompt_tokens, 100u);
  EXPECT_EQ(rec.cached_tokens, 60u);
  EXPECT_EQ(rec.prefilled_tokens, 40u);
  EXPECT_EQ(rec.completion_tokens, 7u);
}

}  // namespace
}  // namespace kvgate::gateway
