#include "session/compactor.h"

#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <thread>

namespace kvgate::session {
namespace {

using nlohmann::json;

// A stand-in tokenizer: 1 token per 4 bytes, 4 tokens per message of overhead.
uint64_t fake_tokens(const std::string& s) { return (s.size() + 3) / 4; }
Result<uint64_t> count_text(const std::string& s) { return fake_tokens(s); }
Result<uint64_t> count_view(const json& view) {
  uint64_t n = 0;
  for (const auto& m : view) n += 4 + fake_tokens(message_text(m));
  return n;
}

Conversation agent(int turns, size_t tool_bytes) {
  Conversation c;
  c.append({{"role", "system"}, {"content", std::string(200, 's')}});
  for (int i = 0; i < turns; ++i) {
    c.append({{"role", "user"}, {"content", "please check file src/mod" + std::to_string(i) + ".cc now."}});
    c.append({{"role", "assistant"},
              {"content", nullptr},
              {"tool_calls", json::array({{{"id", "c" + std::to_string(i)}, {"type", "function"},
                                           {"function", {{"name", "read_file"},
                                                         {"arguments", "{\"path\":\"src/mod" + std::to_string(i) + ".cc\"}"}}}}})}});
    c.append({{"role", "tool"}, {"tool_call_id", "c" + std::to_string(i)},
              {"content", "line one of output " + std::to_string(i) + ".\n" + std::string(tool_bytes, 'x') + "\nerror: failed at 42"}});
    c.append({{"role", "assistant"}, {"content", "Done with " + std::to_string(i) + ". The value is 7."}});
  }
  return c;
}

SummarizeFn fixed_summary(std::string text, int* calls = nullptr) {
  return [text, calls](const Conversation&, uint64_t, uint64_t) -> Result<std::string> {
    if (calls) ++*calls;
    return text;
  };
}

TEST(CompactorTest, L1TruncatesOverlongMessagesOnly) {
  Conversation c = agent(3, 40000);  // each tool result ~10k tokens
  const uint64_t before = *count_view(build_view(c));
  CompactionOptions o{.l1_threshold_tokens = 4096, .l1_keep_tokens = 1000};
  auto r = compact(c, 6000, c.length, count_view, count_text, fixed_summary("s"), o);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->level, "L1");
  EXPECT_EQ(r->truncated_messages, 3U);
  EXPECT_EQ(r->tokens_before, before);
  EXPECT_LE(r->tokens_after, 6000U);
  EXPECT_EQ(r->conversation.cut, 0U);  // nothing dropped
  json v = build_view(r->conversation);
  const std::string tool = v[3]["content"];
  EXPECT_EQ(tool.rfind("line one of output 0.", 0), 0U);  // head kept
  EXPECT_NE(tool.find("tokens elided by kvgate"), std::string::npos);
  EXPECT_NE(tool.find("error: failed at 42"), std::string::npos);  // tail kept
  EXPECT_EQ(r->conversation.generation, c.generation + 1);
}

TEST(CompactorTest, L2SummarisesTheOldestTurnsDownToTheTarget) {
  Conversation c = agent(10, 400);  // ~10 turns of ~150 tokens
  const uint64_t before = *count_view(build_view(c));
  int calls = 0;
  auto r = compact(c, before / 2, c.length, count_view, count_text, fixed_summary("they read files", &calls), {});
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->level, "L2");
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(r->summary_source, "model");
  EXPECT_LE(r->tokens_after, before / 2);
  const Conversation& out = r->conversation;
  ASSERT_TRUE(out.summary);
  EXPECT_EQ(out.summary->covers_until, out.cut);
  EXPECT_TRUE(out.summary->after_system);
  // The cut is at a user turn, and the smallest that fits: one turn earlier would not.
  EXPECT_EQ(out.at(out.cut).message["role"], "user");
  Conversation earlier = c;
  earlier.kept.erase(earlier.kept.begin(), earlier.kept.begin() + static_cast<long>(out.cut - 4 - 1));
  earlier.cut = out.cut - 4;
  EXPECT_GT(*count_view(build_view(earlier)) + 512 + 40, before / 2);
  json v = build_view(out);
  EXPECT_NE(v[0]["content"].get<std::string>().find("they read files"), std::string::npos);
  // Deterministic.
  auto again = compact(c, before / 2, c.length, count_view, count_text, fixed_summary("they read files"), {});
  EXPECT_EQ(build_view(again->conversation), v);
}

TEST(CompactorTest, ExtractiveSummaryWhenTheModelFails) {
  Conversation c = agent(10, 400);
  const uint64_t before = *count_view(build_view(c));
  SummarizeFn failing = [](const Conversation&, uint64_t, uint64_t) -> Result<std::string> {
    return Error("engine timed out");
  };
  auto r = compact(c, before / 2, c.length, count_view, count_text, failing, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->summary_source, "extractive");
  EXPECT_EQ(r->summary_error, "engine timed out");
  const std::string& s = r->conversation.summary->text;
  EXPECT_NE(s.find("called read_file"), std::string::npos) << s;
  EXPECT_NE(s.find("src/mod0.cc"), std::string::npos) << s;
  EXPECT_NE(s.find("error: failed at 42"), std::string::npos) << s;
}

TEST(CompactorTest, RollingSummaryAndAfterTailLayout) {
  Conversation c = agent(10, 400);
  const uint64_t before = *count_view(build_view(c));
  CompactionOptions o{.summary_after_tail = true};
  auto first = compact(c, before / 2, c.length - 1, count_view, count_text, fixed_summary("first"), o);
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(first->conversation.summary);
  EXPECT_FALSE(first->conversation.summary->after_system);
  EXPECT_EQ(first->conversation.summary->anchor, c.length - 1);
  // The retained messages come right after the system message; the note follows them.
  json v = build_view(first->conversation);
  EXPECT_EQ(v[1]["role"], "user");
  EXPECT_EQ(v[1]["content"].get<std::string>().rfind("please check", 0), 0U);
  EXPECT_NE(v[v.size() - 2]["content"].get<std::string>().find("first"), std::string::npos);
  // A second compaction folds the previous summary: the summariser sees it in the conversation.
  Conversation grown = first->conversation;
  for (int i = 0; i < 8; ++i) {
    grown.append({{"role", "user"}, {"content", std::string(300, 'u')}});
    grown.append({{"role", "assistant"}, {"content", std::string(300, 'a')}});
  }
  bool saw_previous = false;
  SummarizeFn check = [&](const Conversation& conv, uint64_t, uint64_t) -> Result<std::string> {
    saw_previous = conv.summary && conv.summary->text == "first";
    return std::string("second");
  };
  auto second = compact(grown, before / 2, grown.length, count_view, count_text, check, o);
  ASSERT_TRUE(second.ok()) << second.error().message();
  EXPECT_TRUE(saw_previous);
  EXPECT_EQ(second->conversation.summary->text, "second");
}

TEST(CompactorTest, L3DropsWholeTurnsAndKeepsTheNewestUserMessage) {
  Conversation c = agent(3, 400);
  c.append({{"role", "user"}, {"content", "final question?"}});
  auto r = compact(c, 120, c.length - 1, count_view, count_text, fixed_summary(std::string(4000, 'S')), {});
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->level, "L3");
  json v = build_view(r->conversation);
  EXPECT_EQ(v.back()["content"], "final question?");
  EXPECT_EQ(v[0]["role"], "system");
  EXPECT_LE(r->tokens_after, 120U);
}

TEST(CompactorTest, ImpossibleFitIsExplained) {
  Conversation c;
  c.append({{"role", "system"}, {"content", std::string(4000, 's')}});
  c.append({{"role", "user"}, {"content", std::string(4000, 'u')}});
  auto r = compact(c, 500, 1, count_view, count_text, fixed_summary("s"), {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("newest user message"), std::string::npos);
}

// A newest user message too large for the target but not for the context: the view is sent
// as small as it can be made, not refused.
TEST(CompactorTest, ShortOfTheTargetAViewThatStillFitsIsAccepted) {
  Conversation c = agent(3, 400);
  c.append({{"role", "user"}, {"content", std::string(2000, 'u')}});  // 500 tokens
  const auto refused = compact(c, 400, c.length - 1, count_view, count_text, fixed_summary("s"), {});
  ASSERT_FALSE(refused.ok());
  auto r = compact(c, 400, c.length - 1, count_view, count_text, fixed_summary("s"), {.fit_tokens = 800});
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_GT(r->tokens_after, 400U);
  EXPECT_LE(r->tokens_after, 800U);
  EXPECT_EQ(build_view(r->conversation).back()["content"], std::string(2000, 'u'));  // whole
  EXPECT_FALSE(compact(c, 400, c.length - 1, count_view, count_text, fixed_summary("s"), {.fit_tokens = 500}).ok());
}

// Without summaries (a client keeping a sliding window), the oldest turns are dropped.
TEST(CompactorTest, WithoutSummariesTheOldestTurnsAreDropped) {
  Conversation c = agent(6, 400);
  c.append({{"role", "user"}, {"content", "final question?"}});
  int calls = 0;
  auto r = compact(c, 400, c.length - 1, count_view, count_text, fixed_summary("s", &calls), {.summaries = false});
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(calls, 0);
  EXPECT_FALSE(r->conversation.summary);
  EXPECT_EQ(r->level, "L3");
  EXPECT_GT(r->dropped_messages, 0U);
  EXPECT_LE(r->tokens_after, 400U);
}

TEST(CompactorTest, ToolCallAndResultsStayTogether) {
  Conversation c = agent(6, 400);
  const uint64_t before = *count_view(build_view(c));
  auto r = compact(c, before * 2 / 3, c.length, count_view, count_text, fixed_summary("s"), {});
  ASSERT_TRUE(r.ok());
  json v = build_view(r->conversation);
  // Every tool result's call is in the view.
  std::set<std::string> calls;
  for (const auto& m : v) {
    if (m.contains("tool_calls")) {
      for (const auto& tc : m["tool_calls"]) calls.insert(tc["id"]);
    }
    if (m["role"] == "tool") {
      EXPECT_TRUE(calls.count(m["tool_call_id"])) << m.dump();
    }
  }
}

// The measured case: 100,000 messages took 156.6 s of compaction. Whatever the counting
// costs, compact() gives up at its time limit with an error that says so.
TEST(CompactorTest, TimeLimitBoundsACompaction) {
  Conversation c = agent(200, 200);
  int calls = 0;
  ViewCountFn slow = [&](const json& view) -> Result<uint64_t> {
    ++calls;
    std::this_thread::sleep_for(std::chrono::milliseconds(40));
    return count_view(view);
  };
  CompactionOptions o{.time_limit = std::chrono::milliseconds(100)};
  const auto t0 = std::chrono::steady_clock::now();
  auto r = compact(c, 3000, c.length, slow, count_text, fixed_summary("s"), o);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("compaction took longer than 100 ms"), std::string::npos) << r.error().message();
  // Without the limit it would count for 200 views of 40 ms and more; a loaded machine may
  // stretch each call, not the number of them.
  EXPECT_LT(ms, 5000);
  EXPECT_LE(calls, 5);
  // Without the limit the same compaction completes.
  EXPECT_TRUE(compact(c, 3000, c.length, count_view, count_text, fixed_summary("s"), {}).ok());
}

// A model summary slowed by a loaded engine costs the turn time, not the turn: the limit
// bounds kvgate's own work (counting), not the engine's summary (it has its own time-out).
TEST(CompactorTest, ASlowModelSummaryDoesNotCountAgainstTheTimeLimit) {
  Conversation c = agent(20, 2000);
  SummarizeFn slow_summary = [](const Conversation&, uint64_t, uint64_t) -> Result<std::string> {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    return std::string("model summary");
  };
  // The summary alone outlasts the limit; the counting, even on a loaded machine, does not.
  CompactionOptions o{.time_limit = std::chrono::milliseconds(1000)};
  auto r = compact(c, 2000, c.length, count_view, count_text, slow_summary, o);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->summary_source, "model");
}

// A view larger than the engine's context cannot be sent as a summary prompt (the measured
// case sent 600,090 tokens, and a request of 18,359 tokens overflowed a 16K engine): the
// model is asked with a view whose oldest turns are their extractive summary, which fits.
TEST(CompactorTest, AViewLargerThanTheContextIsSummarisedFromWhatFits) {
  Conversation c = agent(20, 2000);
  const uint64_t before = *count_view(build_view(c));
  CompactionOptions o{.summary_max_tokens = 200, .summary_prompt_limit = before / 2};
  json asked;
  uint64_t asked_until = 0;
  SummarizeFn model = [&](const Conversation& conv, uint64_t until, uint64_t) -> Result<std::string> {
    asked = build_view(conv);
    asked_until = until;
    return std::string("model summary");
  };
  auto r = compact(c, 2000, c.length, count_view, count_text, model, o);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->summary_source, "model") << r->summary_error;
  ASSERT_FALSE(asked.empty());
  // What the model was asked fits the context with the instruction and the summary.
  EXPECT_LE(*count_view(asked) + o.summary_max_tokens + kSummaryRequestTokens, o.summary_prompt_limit);
  // It begins at a user turn before the cut, the turns before it in an extractive note.
  EXPECT_GT(r->summary_view_from, 0U);
  EXPECT_LT(r->summary_view_from, asked_until);
  const std::string system = asked[0]["content"];
  EXPECT_NE(system.find("src/mod0.cc"), std::string::npos)
      << system.substr(0, 400);  // the oldest turn, extracted
  EXPECT_EQ(asked[1]["role"], "user");
  // As many turns as fit: one turn earlier would not have.
  EXPECT_GT(*count_view(asked) + 4 * (2000 / 4),
            o.summary_prompt_limit - o.summary_max_tokens - kSummaryRequestTokens);
  // Not even the last turns fit: extractive, and said why.
  o.summary_prompt_limit = 2000;
  int calls = 0;
  r = compact(c, 2000, c.length, count_view, count_text, fixed_summary("model summary", &calls), o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(r->summary_source, "extractive");
  EXPECT_NE(r->summary_error.find("larger than the engine's context"), std::string::npos) << r->summary_error;
  // A view that fits is asked whole.
  o.summary_prompt_limit = before * 2;
  r = compact(c, 2000, c.length, count_view, count_text, fixed_summary("model summary", &calls), o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(r->summary_view_from, 0U);
}

}  // namespace
}  // namespace kvgate::session
