// The stabiliser on what the agent CLIs really send (tests/fixtures/agents, README there):
// requests of one conversation recorded from Claude Code, Codex and Qwen Code, taken in the
// way Gateway::chat takes them (MiniGateway: recognition, intake, view), the Anthropic and
// Responses bodies converted by src/wire first. A conversation's upstream prompt must only
// grow at its end from turn to turn — also when the client moves its date reminder, rewrites
// its cache markers or starts the next day — while the current values reach the model and
// nothing of one conversation reaches another (IsolationOracle).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "session/normalize.h"
#include "session/stabiliser.h"
#include "testing/isolation_oracle.h"
#include "testing/wire_support.h"

namespace kvgate::session {
namespace {

using nlohmann::json;
using testing::IsolationOracle;
using testing::MiniGateway;
using wire::testing::agent_request_messages;

const std::string kScope = scope_of_key("agent-key");

// `messages` with every occurrence of `from` in their texts replaced by `to` (the same
// conversation on another day).
json replaced(const json& messages, const std::string& from, const std::string& to) {
  std::string text = messages.dump();
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return json::parse(text);
}

// The continued request's reply is what the client echoes back: the assistant message after
// the first request's messages.
json reply_in(const json& continued, size_t first_request_size) { return continued.at(first_request_size); }

// Whether `before` is a prefix of `after`, message by message, byte for byte.
bool view_extends(const json& before, const json& after) {
  if (after.size() < before.size()) return false;
  for (size_t i = 0; i < before.size(); ++i) {
    if (before[i].dump() != after[i].dump()) return false;
  }
  return true;
}

struct Case {
  const char* cli;
  const char* today;     // the date as the CLI writes it
  const char* tomorrow;  // the next day, written the same way
};

class AgentConversationTest : public ::testing::TestWithParam<Case> {};

// Two turns of one conversation through recognition and intake: the second turn's intake and
// view, the first view with the reply after it (what the second must extend), and the
// oracle's verdict on the second view.
struct TwoTurns {
  MiniGateway::Turn second;
  json first_and_reply;
  std::string oracle;
};
TwoTurns two_turns(const json& first, const json& second) {
  const json reply = reply_in(second, first.size());
  MiniGateway gw;
  IsolationOracle oracle;
  auto t1 = gw.send(kScope, std::nullopt, first, reply);
  oracle.answered(kScope, std::nullopt, first, reply);
  TwoTurns out;
  out.second = gw.send(kScope, std::nullopt, second, json{{"role", "assistant"}, {"content", "done"}});
  EXPECT_EQ(t1.session, out.second.session);
  out.first_and_reply = t1.view;
  out.first_and_reply.push_back(reply);
  out.oracle = oracle.check(kScope, std::nullopt, second, out.second.view);
  return out;
}

TEST_P(AgentConversationTest, TheSecondTurnExtendsTheFirstTurnsPrompt) {
  const Case c = GetParam();
  const json first = agent_request_messages(c.cli, "run3-001");
  const json second = agent_request_messages(c.cli, "continue-001");
  ASSERT_GT(second.size(), first.size() + 1);
  const TwoTurns t = two_turns(first, second);
  const auto& t2 = t.second;
  EXPECT_EQ(evidence_name(t2.intake.evidence), std::string("history_echo"));
  EXPECT_FALSE(t2.intake.cause.has_value()) << t2.intake.cause_detail;
  EXPECT_TRUE(view_extends(t.first_and_reply, t2.view))
      << "first differing message " << first_different_message(t.first_and_reply, t2.view);
  EXPECT_EQ(t2.view.back(), second.back());  // the new message as the client sent it
  EXPECT_EQ(t.oracle, "");
}

TEST_P(AgentConversationTest, TheNextDayThePinnedDateStaysAndTheNewDateIsInTheNote) {
  const Case c = GetParam();
  const json first = agent_request_messages(c.cli, "run3-001");
  const json second = replaced(agent_request_messages(c.cli, "continue-001"), c.today, c.tomorrow);
  const TwoTurns t = two_turns(first, second);
  const auto& t2 = t.second;
  EXPECT_EQ(evidence_name(t2.intake.evidence), std::string("history_echo"));
  ASSERT_FALSE(t2.intake.volatile_now.empty());
  for (const auto& line : t2.intake.volatile_now) EXPECT_NE(line.find(c.tomorrow), std::string::npos) << line;
  EXPECT_TRUE(view_extends(t.first_and_reply, t2.view));
  const std::string newest = t2.view.back().dump();
  EXPECT_NE(newest.find(json(std::string(kVolatileNoteHead)).dump().substr(1, 20)), std::string::npos) << newest;
  EXPECT_NE(newest.find(c.tomorrow), std::string::npos);
  EXPECT_EQ(t.oracle, "");
}

TEST_P(AgentConversationTest, ARunTheNextDayIsSentItsOwnDate) {
  // Two runs a day apart share everything up to the date line, but the second carries no
  // turn of the first: it is another conversation, and gets only its own values.
  const Case c = GetParam();
  const json yesterday = agent_request_messages(c.cli, "run1-001");
  const json today = replaced(agent_request_messages(c.cli, "run2-001"), c.today, c.tomorrow);
  MiniGateway gw;
  IsolationOracle oracle;
  auto t1 = gw.send(kScope, std::nullopt, yesterday, json{{"role", "assistant"}, {"content", "ok"}});
  oracle.answered(kScope, std::nullopt, yesterday, json{{"role", "assistant"}, {"content", "ok"}});
  auto t2 = gw.send(kScope, std::nullopt, today, json{{"role", "assistant"}, {"content", "ok"}});
  EXPECT_EQ(evidence_name(t2.intake.evidence), std::string("none"));
  EXPECT_EQ(t2.view, today);
  EXPECT_EQ(t2.view.dump().find(c.today), std::string::npos);
  EXPECT_EQ(oracle.check(kScope, std::nullopt, today, t2.view), "");
  // What the engine can still reuse: the prompt up to the first date line.
  const std::string a = t1.view.dump();
  const std::string b = t2.view.dump();
  const size_t date = a.find(c.today);
  const size_t shared = first_different_byte(a, b);
  EXPECT_GE(shared, date);
  EXPECT_LT(shared, date + std::string(c.today).size());
  std::printf("[ %s ] a run the next day shares %zu of %zu bytes of the prompt (%.1f %%)\n", c.cli, shared, a.size(),
              100.0 * static_cast<double>(shared) / static_cast<double>(a.size()));
}

TEST_P(AgentConversationTest, NothingButTheMessagesChangesInTheChatBodyBetweenTurns) {
  // Tools, sampling and the other fields kvgate sends upstream are the same in both turns (the
  // per-run and per-request ids of the CLIs stay outside the chat body).
  const Case c = GetParam();
  json first = wire::testing::agent_request_chat(c.cli, "run3-001");
  json second = wire::testing::agent_request_chat(c.cli, "continue-001");
  ASSERT_TRUE(first.contains("messages") && second.contains("messages"));
  first.erase("messages");
  second.erase("messages");
  EXPECT_EQ(first, second);
}

TEST_P(AgentConversationTest, RunsOfOneDayRepeatTheFirstRequest) {
  const Case c = GetParam();
  MiniGateway gw;
  auto t1 = gw.send(kScope, std::nullopt, agent_request_messages(c.cli, "run1-001"), json{{"role", "assistant"}, {"content", "a"}});
  auto t2 = gw.send(kScope, std::nullopt, agent_request_messages(c.cli, "run2-001"), json{{"role", "assistant"}, {"content", "b"}});
  auto t3 = gw.send(kScope, std::nullopt, agent_request_messages(c.cli, "run3-001"), json{{"role", "assistant"}, {"content", "c"}});
  EXPECT_EQ(t1.view.dump(), t2.view.dump());
  EXPECT_EQ(t2.view.dump(), t3.view.dump());
  EXPECT_FALSE(t3.intake.cause.has_value()) << t3.intake.cause_detail;
}

INSTANTIATE_TEST_SUITE_P(Captured, AgentConversationTest,
                         ::testing::Values(Case{"claude", "2026-12-02", "2026-12-03"},
                                           Case{"codex", "2026-12-02", "2026-12-03"},
                                           Case{"qwen", "Wednesday, December 2, 2026", "Thursday, December 3, 2026"}),
                         [](const auto& p) { return std::string(p.param.cli); });

TEST(AgentFixtureTest, QwenCodesMovedDateReminderLeavesTheEarlierMessageTheSame) {
  const json first = agent_request_messages("qwen", "run3-001");
  const json second = agent_request_messages("qwen", "continue-001");
  // The client removed the reminder from message 1 and put it first in the new message.
  ASSERT_EQ(first[1]["content"].size(), second[1]["content"].size() + 1);
  EXPECT_TRUE(is_volatile_reminder(first[1]["content"][3]["text"].get<std::string>()));
  EXPECT_NE(exact_hash(first[1]), exact_hash(second[1]));
  EXPECT_EQ(message_hash(first[1]), message_hash(second[1]));
  const auto lines = pin_volatile_message(first[1], second[1], second.back());
  ASSERT_TRUE(lines.has_value());
  EXPECT_TRUE(lines->empty());
  // Without the reminder in the newest message it is a change of the earlier message.
  json newest = second.back();
  newest["content"].erase(0);
  EXPECT_FALSE(pin_volatile_message(first[1], second[1], newest).has_value());
  // The long context part with today's date and the folder listing is no reminder.
  EXPECT_FALSE(is_volatile_reminder(first[1]["content"][1]["text"].get<std::string>()));
}

TEST(AgentFixtureTest, ClaudeCodesMovedCacheMarkerIsNoChangeOnceConverted) {
  // messages[1].content goes from [{"type":"text",…,"cache_control":…}] to a plain string.
  const json first = agent_request_messages("claude", "run3-001");
  const json second = agent_request_messages("claude", "continue-001");
  ASSERT_GE(first.size(), 3U);
  EXPECT_EQ(first[2].value("role", ""), "system");  // "# Environment", after the first user message
  for (size_t i = 0; i < first.size(); ++i) EXPECT_EQ(exact_hash(first[i]), exact_hash(second[i])) << i;
  // Also in the chat form, an array of one text part and the string are the same message.
  json parts = second[2];
  parts["content"] = json::array({{{"type", "text"}, {"text", second[2]["content"]}, {"cache_control", {{"type", "ephemeral"}}}}});
  EXPECT_EQ(exact_hash(parts), exact_hash(second[2]));
}

TEST(AgentFixtureTest, QwenCodesSideRequestIsAnotherConversation) {
  // The memory extraction request (another system prompt) between two turns of the main
  // conversation takes nothing from it and leaves it whole.
  const json main1 = agent_request_messages("qwen", "run3-001");
  const json main2 = agent_request_messages("qwen", "continue-001");
  const json side = agent_request_messages("qwen", "run1-002");
  MiniGateway gw;
  auto t1 = gw.send(kScope, std::nullopt, main1, reply_in(main2, main1.size()));
  auto ts = gw.send(kScope, std::nullopt, side, json{{"role", "assistant"}, {"content", "nothing to remember"}});
  auto t2 = gw.send(kScope, std::nullopt, main2, json{{"role", "assistant"}, {"content", "done"}});
  EXPECT_NE(ts.session, t1.session);
  EXPECT_EQ(ts.how, "new");
  EXPECT_EQ(t2.session, t1.session);
  EXPECT_EQ(evidence_name(t2.intake.evidence), std::string("history_echo"));
}

}  // namespace
}  // namespace kvgate::session
