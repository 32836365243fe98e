#include "bench/replay.h"

#include <gtest/gtest.h>

#include "bench/overhead.h"

namespace kvgate::bench {
namespace {

using nlohmann::json;

TurnResult turn(size_t n, FailureKind f, uint64_t prompt, uint64_t cached, double ttft) {
  TurnResult t;
  t.turn = n;
  t.failure = f;
  t.status = f == FailureKind::kNone ? 200 : 400;
  t.prompt_tokens = prompt;
  t.cached_tokens = f == FailureKind::kNone ? cached : 0;
  t.prefilled_tokens = f == FailureKind::kNone ? prompt - cached : 0;
  t.engine_processed = static_cast<double>(t.prefilled_tokens);
  t.engine_cached = static_cast<double>(t.cached_tokens);
  t.ttft_ms = f == FailureKind::kNone ? ttft : -1;
  t.total_ms = ttft + 10;
  return t;
}

TEST(ReplayTest, PathSummary) {
  std::vector<TurnResult> turns = {
      turn(1, FailureKind::kNone, 1000, 0, 100), turn(2, FailureKind::kNone, 2000, 990, 50),
      turn(3, FailureKind::kContextOverflow, 9000, 0, 0), turn(4, FailureKind::kOutputParse, 3000, 0, 0),
      turn(5, FailureKind::kNone, 3000, 2990, 30)};
  turns[4].compactions = json::array({{{"level", "L2"}}});
  const PathSummary s = summarize_path(turns);
  EXPECT_EQ(s.turns, 5U);
  EXPECT_EQ(s.ok, 3U);
  EXPECT_EQ(s.failures.at("context_overflow"), 1U);
  EXPECT_EQ(s.failures.at("output_parse"), 1U);
  EXPECT_EQ(s.first_failure_turn, 3U);
  EXPECT_EQ(s.prompt_tokens, 6000U);  // successful turns only
  EXPECT_EQ(s.cached_tokens, 3980U);
  EXPECT_EQ(s.prefilled_tokens, 2020U);
  EXPECT_DOUBLE_EQ(s.prefilled_ratio, 2020.0 / 6000.0);
  EXPECT_DOUBLE_EQ(s.engine_processed_ratio, 2020.0 / 6000.0);
  EXPECT_EQ(s.ttft_ms.n, 3U);
  EXPECT_EQ(s.ttft_ms.p50, 50);
  EXPECT_EQ(s.ttft_ms.sum, 180);
  EXPECT_EQ(s.total_ms.n, 5U);
  EXPECT_EQ(s.compactions, 1U);
}

TEST(ReplayTest, ComparisonUsesTurnsBothAnswered) {
  PathResult direct{.name = "direct"}, gw{.name = "gateway"};
  direct.turns = {turn(1, FailureKind::kNone, 1000, 0, 100), turn(2, FailureKind::kNone, 2000, 0, 200),
                  turn(3, FailureKind::kContextOverflow, 9000, 0, 0)};
  gw.turns = {turn(1, FailureKind::kNone, 1000, 0, 110), turn(2, FailureKind::kNone, 2000, 1000, 100),
              turn(3, FailureKind::kNone, 5000, 4000, 100)};
  const json c = compare_paths(direct, gw);
  EXPECT_EQ(c["turns_both_answered"], 2);
  EXPECT_DOUBLE_EQ(c["ttft_sum_ratio"].get<double>(), 210.0 / 300.0);
  EXPECT_DOUBLE_EQ(c["ttft_p50_ratio"].get<double>(), 105.0 / 150.0);
  EXPECT_DOUBLE_EQ(c["prefilled_ratio"].get<double>(), 2000.0 / 3000.0);
  ReplayReport r{.trace = "t", .options = {{"turns", 3}, {"context", 4096}}};
  r.paths = {direct, gw};
  r.paths[0].summary = summarize_path(direct.turns);
  r.paths[1].summary = summarize_path(gw.turns);
  const std::string text = replay_text(r);
  EXPECT_NE(text.find("direct failures: 1 context_overflow (first at turn 3)"), std::string::npos) << text;
  EXPECT_NE(text.find("over the 2 turns both answered"), std::string::npos) << text;
  const json j = to_json(r);
  EXPECT_EQ(j["paths"][0]["turns"][2]["result"], "context_overflow");
  EXPECT_EQ(j["gateway_vs_direct"]["turns_both_answered"], 2);
}

TEST(OverheadTest, LargeRequestIsAboutTheSizeAsked) {
  for (uint64_t bytes : {16384ULL, 1ULL << 20}) {
    const json m = large_messages(bytes);
    const json body = {{"messages", m}, {"max_tokens", 1}};
    const size_t size = body.dump().size();
    EXPECT_GE(size, bytes);
    EXPECT_LT(size, bytes + 20000);
    EXPECT_EQ(m.front()["role"], "system");
    EXPECT_EQ(m.back()["role"], "user");
    for (size_t i = 2; i < m.size(); ++i) EXPECT_NE(m[i]["role"], m[i - 1]["role"]) << i;
  }
  EXPECT_EQ(large_messages(4096), large_messages(4096));  // deterministic
  // The context leaves the large request under the gateway's 80% watermark even at 5 bytes a token.
  EXPECT_GE(static_cast<double>(overhead_context(1 << 20)) * 0.8, (1 << 20) / 5.0 + 1024);
}

}  // namespace
}  // namespace kvgate::bench
