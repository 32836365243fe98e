#include "session/turn_log.h"

#include <gtest/gtest.h>

namespace kvgate::session {
namespace {

using nlohmann::json;

json msg(const std::string& role, const std::string& content) { return {{"role", role}, {"content", content}}; }

TEST(TurnLogTest, AnAppendedTurnBreaksAtTheFirstNewMessage) {
  const json before = json::array({msg("system", "You are terse."), msg("user", "hi")});
  json after = before;
  after.push_back(msg("assistant", "hello"));
  after.push_back(msg("user", "next"));
  const PrefixBreak b = locate_break(before, after, "", "");
  EXPECT_EQ(b.message, 2u);
  EXPECT_FALSE(b.role_before.has_value());
  EXPECT_EQ(b.role_after, "assistant");
  EXPECT_EQ(b.byte_in_message, 0u);
  EXPECT_EQ(b.before.same, "");
  EXPECT_EQ(b.before.differs, "");
  EXPECT_EQ(b.after.same, "");
  EXPECT_EQ(b.after.differs, "hello");
  EXPECT_FALSE(b.prompt_byte.has_value());
}

TEST(TurnLogTest, AnEditedMessageIsLocatedToTheByteWithExcerptsOfBoth) {
  const json before = json::array({msg("system", "s"), msg("user", "The build is green, ship it."), msg("user", "x")});
  const json after = json::array({msg("system", "s"), msg("user", "The build is red, ship it."), msg("user", "x")});
  const PrefixBreak b = locate_break(before, after, "<s>The build is green", "<s>The build is red");
  EXPECT_EQ(b.message, 1u);
  EXPECT_EQ(b.role_before, "user");
  EXPECT_EQ(b.role_after, "user");
  EXPECT_EQ(b.byte_in_message, 13u);  // "The build is " is 13 bytes
  EXPECT_EQ(b.before.same, "The build is ");
  EXPECT_EQ(b.before.differs, "green, ship it.");
  EXPECT_EQ(b.after.same, "The build is ");
  EXPECT_EQ(b.after.differs, "red, ship it.");
  EXPECT_EQ(b.prompt_byte, 16u);  // "<s>The build is " is 16 bytes
}

TEST(TurnLogTest, ExcerptsAreBoundedAndNeverSplitACharacter) {
  // é (C3 A9) and è (C3 A8) share their first byte: the divergence moves back to the character.
  const std::string pad(1000, 'a');
  const json before = json::array({msg("user", pad + "h\xC3\xA9llo" + pad)});
  const json after = json::array({msg("user", pad + "h\xC3\xA8llo" + pad)});
  const PrefixBreak b = locate_break(before, after, "", "", 100);
  EXPECT_EQ(b.byte_in_message, 1001u);
  EXPECT_EQ(b.before.same, std::string(99, 'a') + "h");  // the 100 bytes before the divergence
  EXPECT_EQ(b.before.differs.substr(0, 3), "\xC3\xA9l");
  EXPECT_EQ(b.after.differs.substr(0, 3), "\xC3\xA8l");
  EXPECT_EQ(b.before.differs.size(), 100u);
  // A context boundary inside a character moves to its edge: 3-byte characters around.
  std::string euro;
  for (int i = 0; i < 50; ++i) euro += "\xE2\x82\xAC";  // €
  const json b2 = json::array({msg("user", euro + "X" + euro)});
  const json a2 = json::array({msg("user", euro + "Y" + euro)});
  const PrefixBreak c = locate_break(b2, a2, "", "", 10);
  EXPECT_EQ(c.byte_in_message, 150u);
  EXPECT_EQ(c.before.same, "\xE2\x82\xAC\xE2\x82\xAC\xE2\x82\xAC");   // 9 of the 10 bytes: whole characters
  EXPECT_EQ(c.before.differs, "X\xE2\x82\xAC\xE2\x82\xAC\xE2\x82\xAC");
}

TEST(TurnLogTest, InvalidUtf8NeverStretchesAnExcerpt) {
  // Found by turn_log_fuzz: texts that start with a continuation byte and differ at once (the
  // next character boundary lay past the divergence, and the excerpt ran to the end).
  const std::string rest(50, 'x');
  const PrefixBreak b = locate_break(json::array({msg("user", "\x80" + rest)}), json::array({msg("user", "\x81" + rest)}), "", "", 10);
  EXPECT_LE(b.before.same.size(), 10u);
  EXPECT_LE(b.after.differs.size(), 10u);
  EXPECT_EQ(b.before.same, b.after.same);
}

TEST(TurnLogTest, ToolCallsAndHiddenFieldsAreShown) {
  auto call = [](const std::string& args) {
    return json{{"role", "assistant"},
                {"content", "Let me look."},
                {"tool_calls", json::array({{{"id", "c1"},
                                             {"type", "function"},
                                             {"function", {{"name", "read"}, {"arguments", args}}}}})}};
  };
  const PrefixBreak b = locate_break(json::array({call("{\"path\":\"a.c\"}")}), json::array({call("{\"path\":\"b.c\"}")}), "", "");
  EXPECT_EQ(b.before.same, "Let me look.\n[tool call read {\"path\":\"");
  EXPECT_EQ(b.before.differs, "a.c\"}]");
  EXPECT_EQ(b.after.differs, "b.c\"}]");
  // Same text, another field: the message's JSON is shown.
  json x = msg("tool", "42");
  json y = x;
  x["tool_call_id"] = "c1";
  y["tool_call_id"] = "c2";
  const PrefixBreak h = locate_break(json::array({x}), json::array({y}), "", "");
  EXPECT_NE(h.before.differs.find("1\""), std::string::npos) << h.before.differs;
  EXPECT_NE(h.after.differs.find("2\""), std::string::npos) << h.after.differs;
  EXPECT_EQ(h.before.same, h.after.same);
}

TEST(TurnLogTest, ADroppedMessageHasNoRoleAfter) {
  const json before = json::array({msg("system", "s"), msg("user", "old"), msg("user", "new")});
  const json after = json::array({msg("system", "s")});
  const PrefixBreak b = locate_break(before, after, "", "");
  EXPECT_EQ(b.message, 1u);
  EXPECT_EQ(b.role_before, "user");
  EXPECT_FALSE(b.role_after.has_value());
  EXPECT_EQ(b.before.differs, "old");
  EXPECT_EQ(b.after.differs, "");
}

TEST(TurnLogTest, RecomputedTokensAreThePreviousTurnLessWhatWasCached) {
  EXPECT_EQ(recomputed_tokens(0, 0, 500, 0), 0u);         // a first turn recomputes nothing old
  EXPECT_EQ(recomputed_tokens(1000, 50, 1200, 1040), 10u);
  EXPECT_EQ(recomputed_tokens(1000, 50, 1200, 1100), 0u);  // more cached than the old turn
  EXPECT_EQ(recomputed_tokens(1000, 50, 600, 100), 500u);  // compacted: at most the new prompt
  EXPECT_EQ(recomputed_tokens(1000, 50, 1200, 0), 1050u);  // cache lost
}

TEST(TurnLogTest, KeepsTheLastTurnsNumberedFromOne) {
  TurnLog log(3);
  for (int i = 0; i < 5; ++i) {
    TurnRecord t;
    t.prompt_tokens = 100u * static_cast<uint64_t>(i + 1);
    if (i == 3) t.prefix_break = PrefixBreak{.cause = "client_edit"};
    log.add(t);
  }
  EXPECT_EQ(log.find(2), nullptr);
  ASSERT_NE(log.find(3), nullptr);
  EXPECT_EQ(log.find(3)->prompt_tokens, 300u);
  EXPECT_EQ(log.find(5)->prompt_tokens, 500u);
  EXPECT_EQ(log.find(6), nullptr);
  const json all = log.to_json();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0]["n"], 3);
  EXPECT_EQ(all[1]["break"]["cause"], "client_edit");
  EXPECT_FALSE(all[1]["break"].contains("before"));  // listings carry no texts
  EXPECT_TRUE(to_json(*log.find(4), true)["break"].contains("before"));
  const json s = log.summary(2);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0]["n"], 4);
  EXPECT_EQ(s[0]["cause"], "client_edit");
  EXPECT_TRUE(s[1]["cause"].is_null());
}

}  // namespace
}  // namespace kvgate::session
