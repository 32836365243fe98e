#include "session/conversation.h"

#include <gtest/gtest.h>

#include "session/normalize.h"

namespace kvgate::session {
namespace {

using nlohmann::json;

Conversation sample(int turns) {
  Conversation c;
  c.append({{"role", "system"}, {"content", "be brief"}});
  for (int i = 0; i < turns; ++i) {
    c.append({{"role", "user"}, {"content", "question " + std::to_string(i)}});
    c.append({{"role", "assistant"}, {"content", "answer " + std::to_string(i)}});
  }
  return c;
}

TEST(ConversationTest, ViewIsTheHistoryWhenNothingWasDecided) {
  Conversation c = sample(2);
  EXPECT_EQ(c.length, 5U);
  EXPECT_EQ(c.kept.size(), 4U);
  json v = build_view(c);
  ASSERT_EQ(v.size(), 5U);
  EXPECT_EQ(v[0]["content"], "be brief");
  EXPECT_EQ(v[4]["content"], "answer 1");
  // The chain is the same as the client's.
  json client = json::array();
  for (const auto& m : v) client.push_back(m);
  EXPECT_EQ(c.chain, chain_hashes(client));
}

TEST(ConversationTest, SummaryLayouts) {
  Conversation c = sample(3);  // sys, u0 a0 u1 a1 u2 a2
  c.cut = 3;                   // keep u1.. ; u0 a0 summarised
  c.kept.erase(c.kept.begin(), c.kept.begin() + 2);
  c.summary = SummaryNote{.text = "they talked", .covers_until = 3, .anchor = 3, .after_system = true, .source = "model"};
  json v = build_view(c);
  ASSERT_EQ(v.size(), 5U);
  EXPECT_NE(v[0]["content"].get<std::string>().find("they talked"), std::string::npos);
  EXPECT_EQ(v[1]["content"], "question 1");

  c.summary->after_system = false;
  c.summary->anchor = 5;  // before u2: the retained u1 a1 keep their positions after sys
  v = build_view(c);
  ASSERT_EQ(v.size(), 6U);
  EXPECT_EQ(v[0]["content"], "be brief");
  EXPECT_EQ(v[1]["content"], "question 1");
  EXPECT_EQ(v[3]["role"], "user");
  EXPECT_NE(v[3]["content"].get<std::string>().find("they talked"), std::string::npos);
  EXPECT_EQ(v[4]["content"], "question 2");
}

TEST(ConversationTest, TruncationsAndNotesAreReappliedByHash) {
  Conversation c = sample(1);
  std::string big(1000, 'x');
  big += "END";
  c.append({{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "START" + big}});
  const uint64_t h = c.kept.back().hash;
  c.truncations[h] = {.head_chars = 5, .tail_chars = 3, .elided_tokens = 250};
  c.notes[1] = "\n[now: 10:05]";
  json v = build_view(c);
  EXPECT_EQ(v[3]["content"], "START" + truncation_marker(250) + "END");
  EXPECT_EQ(v[1]["content"], "question 0\n[now: 10:05]");
  EXPECT_EQ(build_view(c), v);  // deterministic
}

TEST(ConversationTest, TruncationRespectsUtf8) {
  const std::string text = "汉字汉字汉字汉字";  // 3 bytes per character
  std::string out = apply_truncation(text, {.head_chars = 4, .tail_chars = 4, .elided_tokens = 1});
  EXPECT_EQ(out.substr(0, 3), "汉");
  EXPECT_EQ(out.substr(out.size() - 3), "字");
}

TEST(ConversationTest, TruncateOnDivergence) {
  Conversation c = sample(3);
  c.truncate(4);  // the client rewrote history from a1 on
  EXPECT_EQ(c.length, 4U);
  EXPECT_EQ(c.kept.size(), 3U);
  EXPECT_EQ(c.chain.size(), 4U);
  c.append({{"role", "assistant"}, {"content", "different"}});
  EXPECT_EQ(build_view(c).back()["content"], "different");
}

TEST(ConversationTest, JsonRoundTrip) {
  Conversation c = sample(2);
  c.truncations[c.kept[1].hash] = {.head_chars = 2, .tail_chars = 2, .elided_tokens = 9};
  c.notes[1] = "note";
  c.summary = SummaryNote{.text = "s", .covers_until = 1, .anchor = 1, .after_system = false, .source = "extractive", .tokens = 3};
  c.generation = 2;
  auto back = Conversation::from_json(c.to_json());
  ASSERT_TRUE(back);
  EXPECT_EQ(build_view(*back), build_view(c));
  EXPECT_EQ(back->chain, c.chain);
  EXPECT_EQ(back->generation, 2U);
  json broken = c.to_json();
  broken["length"] = 99;
  EXPECT_FALSE(Conversation::from_json(broken));
  EXPECT_FALSE(Conversation::from_json(json::parse("{\"version\":1}")));
}

}  // namespace
}  // namespace kvgate::session

namespace kvgate::session {
namespace {

TEST(ConversationTest, NotesBelongToPositionsNotTexts) {
  Conversation c;
  c.append({{"role", "system"}, {"content", "s"}});
  c.append({{"role", "user"}, {"content", "continue"}});
  c.append({{"role", "assistant"}, {"content", "a"}});
  c.append({{"role", "user"}, {"content", "continue"}});  // the same text again
  c.notes[1] = " [10:00]";
  c.notes[3] = " [10:05]";
  nlohmann::json v = build_view(c);
  EXPECT_EQ(v[1]["content"], "continue [10:00]");
  EXPECT_EQ(v[3]["content"], "continue [10:05]");
  c.truncate(3);
  EXPECT_EQ(c.notes.count(3), 0U);
  EXPECT_EQ(c.notes.count(1), 1U);
}

}  // namespace
}  // namespace kvgate::session
