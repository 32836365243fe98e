#include "gateway/turn_budget.h"

#include <gtest/gtest.h>

#include "util/json.h"

namespace kvgate::gateway {
namespace {

using nlohmann::json;

TEST(TurnBudgetTest, WatermarksAreFractionsOfTheContextUnlessGiven) {
  const Watermarks w = watermarks(10000, std::nullopt, 0.8, 0.55);
  EXPECT_EQ(w.high, 8000u);
  EXPECT_EQ(w.low, 4400u);
  const Watermarks given = watermarks(10000, 5000, 0.8, 0.5);
  EXPECT_EQ(given.high, 5000u);
  EXPECT_EQ(given.low, 2500u);
  // An unknown context: no watermark, nothing is ever compacted for it.
  EXPECT_EQ(watermarks(0, std::nullopt, 0.8, 0.55).high, 0u);
}

TEST(TurnBudgetTest, TheReplysRoomIsTheRequestsLimitWhenItSetsOne) {
  EXPECT_EQ(reply_reserve(256, 1024), 256u);
  EXPECT_EQ(reply_reserve(std::nullopt, 1024), 1024u);
  EXPECT_EQ(reply_reserve(-1, 1024), 1024u);  // -1: no limit
  EXPECT_EQ(reply_reserve(0, 1024), 1024u);
  EXPECT_EQ(compaction_target(4400, 1024), 3376u);
  EXPECT_EQ(compaction_target(500, 1024), 500u);  // the room is larger than the target
}

TEST(TurnBudgetTest, AnExtendedViewIsBoundedByThePreviousCountAndTheAddedBytes) {
  const json last = json::array({{{"role", "user"}, {"content", "hello"}}});
  json view = last;
  view.push_back({{"role", "assistant"}, {"content", "hi"}});
  view.push_back({{"role", "user"}, {"content", "more"}});
  const uint64_t added = 2 * 16 + util::json_text(view[1]).size() + util::json_text(view[2]).size();
  EXPECT_EQ(extended_prompt_bound(last, 100, view), 100 + added + 64);
  EXPECT_EQ(extended_prompt_bound(last, 100, last), 164u);  // a repeat adds nothing
  // Nothing known, or the view does not extend the last one: no bound.
  EXPECT_FALSE(extended_prompt_bound(last, 0, view));
  EXPECT_FALSE(extended_prompt_bound(json::array(), 100, view));
  EXPECT_FALSE(extended_prompt_bound(json(), 100, view));
  json edited = view;
  edited[0]["content"] = "hello!";
  EXPECT_FALSE(extended_prompt_bound(last, 100, edited));
  EXPECT_FALSE(extended_prompt_bound(view, 100, last));  // shorter than the last view
}

TEST(TurnBudgetTest, TheExactCountIsNeededOnlyWhereItDecidesSomething) {
  EXPECT_TRUE(needs_exact_count(true, std::nullopt, true, 8000, 1024));  // nothing bounds it
  EXPECT_FALSE(needs_exact_count(true, 6000, true, 8000, 1024));         // far enough below
  EXPECT_TRUE(needs_exact_count(true, 7000, true, 8000, 1024));          // could pass the watermark
  EXPECT_FALSE(needs_exact_count(true, 7000, false, 8000, 1024));        // compaction off: no decision
  EXPECT_FALSE(needs_exact_count(true, 7000, true, 0, 1024));            // no watermark
  EXPECT_FALSE(needs_exact_count(false, std::nullopt, true, 8000, 1024));  // counting off
}

TEST(TurnBudgetTest, AnOverflowAimsBelowWhatTheEngineSaid) {
  // 60 % of the larger count.
  EXPECT_EQ(overflow_target(5000, 0, 0, 0.8, 0.55, 1024), 3000u);
  EXPECT_EQ(overflow_target(5000, 7000, 0, 0.8, 0.55, 1024), 4200u);
  // No more than the engine's context's low watermark less the reply's room.
  EXPECT_EQ(overflow_target(5000, 7000, 4096, 0.8, 0.55, 256), 1802u - 256u);
  EXPECT_EQ(overflow_target(5000, 7000, 4096, 0.8, 0.55, 4000), 1802u);
}

TEST(TurnBudgetTest, AReplyIsCappedToTheContextsRoomOnlyWhenItCouldPassIt) {
  EXPECT_EQ(reply_room(4096, 1000, std::nullopt), 3095u);  // the last cell stays free
  EXPECT_EQ(reply_room(4096, 1000, 5000), 3095u);
  EXPECT_FALSE(reply_room(4096, 1000, 2000));  // the request's own limit fits
  EXPECT_EQ(reply_room(4096, 1000, -1), 3095u);
  EXPECT_FALSE(reply_room(0, 1000, std::nullopt));
  EXPECT_FALSE(reply_room(4096, 0, std::nullopt));
  EXPECT_FALSE(reply_room(4096, 4095, std::nullopt));  // the prompt fills the context
}

}  // namespace
}  // namespace kvgate::gateway
