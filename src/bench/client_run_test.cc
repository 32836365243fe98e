#include "bench/client_run.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace kvgate::bench {
namespace {

using nlohmann::json;

ClientTurnResult turn(size_t client, size_t n, uint64_t client_tokens, uint64_t increment) {
  ClientTurnResult t;
  t.client = client;
  t.turn = n;
  t.kind = n == 1 ? "first" : "user";
  t.new_conversation = n == 1;
  t.status = 200;
  t.client_tokens = client_tokens;
  t.increment_tokens = n == 1 ? 0 : increment;
  return t;
}

std::vector<const ClientTurnResult*> pointers(const std::vector<ClientTurnResult>& turns) {
  std::vector<const ClientTurnResult*> out;
  for (const auto& t : turns) out.push_back(&t);
  return out;
}

TEST(ClientRunTest, SteadyFormulaAndCompactionBound) {
  // 2·12288·500 / (5530 · 19046) = 12,288,000 / 105,324,380
  EXPECT_NEAR(steady_ratio_bound(500, 12288, 6758), 0.116667, 1e-5);
  EXPECT_EQ(compaction_bound(30, 500, 12288, 6758), 4U);  // ⌈15000 / 5530⌉ + 1
  EXPECT_EQ(compaction_bound(10, 0, 12288, 6758), 1U);
}

TEST(ClientRunTest, IdealRunCompactsAtTheHighMarkDownToTheLow) {
  std::vector<ClientTurnResult> turns;
  for (size_t n = 1; n <= 8; ++n) turns.push_back(turn(0, n, 1000 + 500 * (n - 1), 500));
  // Prompts 1000, 1500, ..., 4000, then 4500 > 4000: compacted to 2200.
  const IdealRun r = ideal_run(pointers(turns), {.high = 4000, .low = 2200, .reserve = 0});
  EXPECT_EQ(r.compactions, 1U);
  EXPECT_EQ(r.prompt_tokens, 1000U + 1500 + 2000 + 2500 + 3000 + 3500 + 4000 + 2200);
  EXPECT_EQ(r.prefilled_tokens, 1000U + 6 * 500 + 2200);
  // The reply's room moves both marks down.
  const IdealRun reserved = ideal_run(pointers(turns), {.high = 4100, .low = 2300, .reserve = 100});
  EXPECT_EQ(reserved.prompt_tokens, r.prompt_tokens);
  EXPECT_EQ(reserved.prefilled_tokens, r.prefilled_tokens);
}

TEST(ClientRunTest, IdealRunChargesEditsRestartsAndPastedHistories) {
  std::vector<ClientTurnResult> turns = {turn(0, 1, 1000, 0), turn(0, 2, 0, 500), turn(0, 3, 0, 500)};
  turns[2].rewrite_tokens = 1200;  // an edit: from the edited message to the end
  turns.push_back(turn(0, 4, 700, 0));
  turns[3].new_conversation = true;  // a self-summary's continuation
  turns.push_back(turn(0, 5, 0, 300));
  const IdealRun r = ideal_run(pointers(turns), {.high = 10000, .low = 5000});
  EXPECT_EQ(r.prompt_tokens, 1000U + 1500 + 2000 + 700 + 1000);
  EXPECT_EQ(r.prefilled_tokens, 1000U + 500 + 1200 + 700 + 300);
  EXPECT_EQ(r.compactions, 0U);

  const std::vector<ClientTurnResult> pasted = {turn(0, 1, 30000, 0), turn(0, 2, 0, 500)};
  const IdealRun p = ideal_run(pointers(pasted), {.high = 10000, .low = 5000, .reserve = 50});
  EXPECT_EQ(p.compactions, 1U);
  EXPECT_EQ(p.prompt_tokens, 4950U + 5450);
  EXPECT_EQ(p.prefilled_tokens, 4950U + 500);
}

// A client whose window keeps its request near 2,000 tokens: the ideal gateway cannot keep
// what the client dropped (the request does not carry it), so its prompt follows the window,
// and each turn costs only its increment.
TEST(ClientRunTest, IdealRunFollowsTheClientsWindow) {
  std::vector<ClientTurnResult> turns = {turn(0, 1, 1500, 0)};
  for (size_t n = 2; n <= 5; ++n) turns.push_back(turn(0, n, 2000, 500));
  const IdealRun r = ideal_run(pointers(turns), {.high = 10000, .low = 5000});
  EXPECT_EQ(r.prompt_tokens, 1500U + 4 * 2000);
  EXPECT_EQ(r.prefilled_tokens, 1500U + 4 * 500);
  EXPECT_EQ(r.compactions, 0U);
}

ClientRun clean_run() {
  ClientRun run{.behaviour = "demo", .seed = 3, .path = "gateway", .clients = 2};
  run.marks = {.high = 4000, .low = 2200, .reserve = 0};
  for (size_t n = 1; n <= 6; ++n) {
    for (size_t c = 0; c < 2; ++c) {
      ClientTurnResult t = turn(c, n, 1000 + 500 * (n - 1), 500);
      t.prompt_tokens = t.client_tokens;
      t.prefilled_tokens = n == 1 ? 1000 : 400;
      t.cached_tokens = t.prompt_tokens - t.prefilled_tokens;
      t.session = c == 0 ? "s-a" : "s-b";
      run.turns.push_back(t);
    }
  }
  run.figures = summarize_run(run);
  return run;
}

TEST(ClientRunTest, CleanRunHasNoViolations) {
  const ClientRun run = clean_run();
  EXPECT_EQ(run.figures.turns, 12U);
  EXPECT_EQ(run.figures.ok, 12U);
  EXPECT_EQ(run.figures.conversations_started, 2U);
  EXPECT_EQ(run.figures.sessions, 2U);
  EXPECT_DOUBLE_EQ(run.figures.growth, 500);
  EXPECT_EQ(run.figures.compaction_bound, 2U * 3);  // ⌈6·500/1800⌉ + 1 per client
  EXPECT_TRUE(check_properties(run).empty()) << violations_text(run);
}

// The engine's counters decide the ratio when it keeps them: its answers leave out the chunks
// it reused by shifting (--cache-reuse), so they may say all was prefilled when little was.
TEST(ClientRunTest, TheRatioIsWhatTheEngineComputedWhenItCountsIt) {
  ClientRun run = clean_run();
  for (auto& t : run.turns) {
    t.prefilled_tokens = t.prompt_tokens;  // the answers: nothing read from the cache
    t.engine_processed = 500;              // the engine: only each turn's increment computed
    t.engine_cached = static_cast<double>(t.prompt_tokens) - 500;
  }
  run.figures = summarize_run(run);
  ASSERT_TRUE(run.figures.engine_cached_known);
  auto count = [](const std::vector<Violation>& vs) {
    return std::count_if(vs.begin(), vs.end(), [](const Violation& v) { return v.property == "prefilled_ratio"; });
  };
  EXPECT_EQ(count(check_properties(run)), 0) << violations_text(run);
  for (auto& t : run.turns) {  // the engine recomputed every prompt
    t.engine_processed = static_cast<double>(t.prompt_tokens);
    t.engine_cached = 0;
  }
  run.figures = summarize_run(run);
  const auto violations = check_properties(run);
  ASSERT_EQ(count(violations), 1);
  run.violations = violations;
  EXPECT_NE(violations_text(run).find("by the engine's counters"), std::string::npos) << violations_text(run);
}

TEST(ClientRunTest, ViolationsNameTheTurnAndTheFigures) {
  ClientRun run = clean_run();
  run.turns[4].failure = FailureKind::kOutputParse;  // client 0 turn 3
  run.turns[4].status = 500;
  run.turns[4].error = "does not match the expected format (rescue failed: no readable text)";
  run.turns[6].session = "s-c";  // client 0 turn 4: a new session mid-conversation
  run.turns[9].session = "s-a";  // client 1 turn 5: in client 0's session
  for (size_t i : {1U, 2U, 3U, 5U, 7U, 8U, 10U}) run.turns[i].compactions = json::array({{{"level", "L2"}, {"trigger", "watermark"}}});
  for (auto& t : run.turns) t.prefilled_tokens = t.prompt_tokens;
  run.figures = summarize_run(run);
  run.violations = check_properties(run);
  std::map<std::string, std::vector<std::string>> by;
  for (const auto& v : run.violations) by[v.property].push_back(v.where);
  ASSERT_EQ(by["failed_turn"], std::vector<std::string>{"client 0 turn 3"});
  EXPECT_EQ(by["compactions"].size(), 1U);
  EXPECT_EQ(by["prefilled_ratio"].size(), 1U);
  EXPECT_EQ(by["split"], (std::vector<std::string>{"client 0 turn 4", "client 0 turn 5", "client 1 turn 5",
                                                   "client 1 turn 6"}));
  EXPECT_EQ(by["merge"].size(), 1U);
  const std::string text = violations_text(run);
  EXPECT_NE(text.find("demo seed 3 [gateway]: failed_turn at client 0 turn 3: output_parse (HTTP 500): does not "
                      "match"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("7 compactions > bound 6"), std::string::npos) << text;
  EXPECT_NE(text.find("prefilled ÷ prompt = 1.000"), std::string::npos) << text;
}

// Before its conversation needed a compaction, a turn's prompt is what the client sent; a
// compaction that follows a client's window is needed only on an engine that cannot shift.
TEST(ClientRunTest, APromptShortOfTheRequestBeforeANeededCompactionIsAViolation) {
  ClientRun run = clean_run();
  run.engine_shifts = true;
  run.turns[4].prompt_tokens = 1000;  // client 0 turn 3: 1,000 tokens sent of the client's 2,000
  run.turns[4].compactions = json::array({{{"level", "L3"}, {"trigger", "window"}}});
  run.turns[6].prompt_tokens = 1500;  // client 0 turn 4: short of 2,500 again
  run.figures = summarize_run(run);
  std::vector<std::string> where;
  for (const auto& v : check_properties(run)) {
    if (v.property == "sent_whole") where.push_back(v.where);
  }
  EXPECT_EQ(where, (std::vector<std::string>{"client 0 turn 3", "client 0 turn 4"}));
  run.violations = check_properties(run);
  EXPECT_NE(violations_text(run).find("prompt 1000 tokens of the client's 2000"), std::string::npos)
      << violations_text(run);

  run.engine_shifts = false;  // there, following the window spares the turns after it
  EXPECT_TRUE(check_properties(run).empty()) << violations_text(run);
  run.engine_shifts = true;
  run.turns[4].compactions = json::array({{{"level", "L2"}, {"trigger", "watermark"}}});
  EXPECT_TRUE(check_properties(run).empty()) << violations_text(run);
}

TEST(ClientRunTest, NewConversationMayStartANewSession) {
  ClientRun run = clean_run();
  run.turns[6].new_conversation = true;  // client 0 turn 4: its self-summary continuation
  for (size_t i = 6; i < run.turns.size(); i += 2) run.turns[i].session = "s-c";
  run.figures = summarize_run(run);
  EXPECT_EQ(run.figures.conversations_started, 3U);
  EXPECT_EQ(run.figures.sessions, 3U);
  EXPECT_TRUE(check_properties(run).empty()) << violations_text(run);
}

TEST(ClientRunTest, AContinuationCarryingItsSummaryStaysInItsSession) {
  ClientRun run = clean_run();
  run.turns[6].new_conversation = true;  // client 0 turn 4: its self-summary continuation
  run.turns[6].carries_reply = true;     // with the lines of the summary its session wrote
  for (size_t i = 6; i < run.turns.size(); i += 2) run.turns[i].session = "s-c";
  run.figures = summarize_run(run);
  const auto violations = check_properties(run);
  ASSERT_EQ(violations.size(), 1U) << violations_text(run);
  EXPECT_EQ(violations[0].property, "split");
  EXPECT_NE(violations[0].detail.find("went on from the summary its session wrote"), std::string::npos)
      << violations[0].detail;
}

}  // namespace
}  // namespace kvgate::bench
