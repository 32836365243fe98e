// take_in on its own (pure): each path through intake.h with the stored conversation and the
// request written out, and what the conversation, the first new message and the cause become.
#include "session/intake.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "session/normalize.h"

namespace kvgate::session {
namespace {

using nlohmann::json;

json msg(const std::string& role, const std::string& content) { return {{"role", role}, {"content", content}}; }

// The request taken into `stored` as a session named by its client (`named`), or recognised
// by content (`window`: as a later window).
Intake take(const Conversation& stored, const json& request, bool named, bool window = false,
            uint64_t stored_request_messages = 0, const StabiliserOptions& options = {}) {
  const RequestKeys keys = RequestKeys::of(request);
  return take_in(stored,
                 {.messages = request,
                  .keys = keys,
                  .named = named,
                  .window = window,
                  .stored_request_messages = stored_request_messages},
                 options);
}

// A conversation after one turn: `request` taken into an empty one, then kvgate's reply.
struct Stored {
  Conversation conversation;
  uint64_t request_messages = 0;
};
Stored after_turn(const json& request, const json& reply) {
  Stored s;
  s.conversation = take(Conversation{}, request, false).conversation;
  s.request_messages = s.conversation.length;
  s.conversation.append_reply(reply);
  return s;
}

json history(const Conversation& c) {
  json out = json::array();
  if (c.system) out.push_back(c.system->message);
  for (const auto& m : c.kept) out.push_back(m.message);
  return out;
}

const json kSystem = msg("system", "You help.");

TEST(IntakeTest, AContinuationKeepsTheStoredHistoryAndAppendsTheNewMessages) {
  const Stored s = after_turn(json::array({kSystem, msg("user", "one")}), msg("assistant", "r1"));
  const json request = json::array({kSystem, msg("user", "one"), msg("assistant", "r1"), msg("user", "two")});
  const Intake in = take(s.conversation, request, false, false, s.request_messages);
  EXPECT_EQ(in.evidence, Evidence::kHistoryEcho);  // it carries the last request and kvgate's reply
  EXPECT_FALSE(in.restarted);
  EXPECT_FALSE(in.cause);
  EXPECT_EQ(in.first_new, 3u);
  EXPECT_EQ(history(in.conversation), request);
}

TEST(IntakeTest, ARetryWithoutTheReplyIsTheSamePromptAndNoBreak) {
  const Stored s = after_turn(json::array({msg("user", "one")}), msg("assistant", "r1"));
  const Intake in = take(s.conversation, json::array({msg("user", "one")}), true);
  EXPECT_FALSE(in.cause);
  EXPECT_EQ(in.conversation.length, 1u);
  EXPECT_EQ(in.first_new, 1u);  // nothing new
}

TEST(IntakeTest, ADivergenceTruncatesTheNamedConversationWhereTheClientsHistoryDiffers) {
  const Stored s = after_turn(json::array({kSystem, msg("user", "one"), msg("assistant", "a1"), msg("user", "two")}),
                              msg("assistant", "r2"));
  const json request = json::array({kSystem, msg("user", "one"), msg("assistant", "a1 (edited)"), msg("user", "two")});
  const Intake in = take(s.conversation, request, true);
  ASSERT_TRUE(in.cause);
  EXPECT_EQ(*in.cause, BreakCause::kClientEdit);
  EXPECT_EQ(in.cause_detail, "client history differs from message 2");
  EXPECT_EQ(in.first_new, 2u);
  EXPECT_EQ(history(in.conversation), request);
}

TEST(IntakeTest, WithoutEvidenceADifferentHistoryIsRebuiltFromTheRequestAlone) {
  const Stored s = after_turn(json::array({kSystem, msg("user", "secret"), msg("assistant", "a1"), msg("user", "two")}),
                              msg("assistant", "r2"));
  const json request = json::array({kSystem, msg("user", "other"), msg("assistant", "a1"), msg("user", "two")});
  const Intake in = take(s.conversation, request, false, false, s.request_messages);
  EXPECT_TRUE(in.restarted);
  EXPECT_EQ(in.evidence, Evidence::kNone);
  EXPECT_EQ(history(in.conversation), request);
  EXPECT_EQ(in.first_new, 0u);
}

TEST(IntakeTest, AVolatileSystemLineStaysPinnedAndTheCurrentValuesTravelInANote) {
  const json day1 = msg("system", "You help.\nToday is 2026-01-01.");
  const json day2 = msg("system", "You help.\nToday is 2026-01-02.");
  const Stored s = after_turn(json::array({day1, msg("user", "one")}), msg("assistant", "r1"));
  const json request = json::array({day2, msg("user", "one"), msg("assistant", "r1"), msg("user", "two")});
  const Intake in = take(s.conversation, request, true);
  EXPECT_FALSE(in.cause);  // the prefix stays what the engine has cached
  EXPECT_EQ(in.conversation.pinned_system, "You help.\nToday is 2026-01-01.");
  ASSERT_EQ(in.volatile_now, (std::vector<std::string>{"Today is 2026-01-02."}));
  ASSERT_EQ(in.conversation.notes.count(3), 1u);  // on the newest user message
  EXPECT_NE(in.conversation.notes.at(3).find("2026-01-02"), std::string::npos);
  // Pinning off: the system message is sent as the client has it, and that breaks the prefix.
  const Intake unpinned = take(s.conversation, request, true, false, 0, {.pin_volatile_lines = false});
  ASSERT_TRUE(unpinned.cause);
  EXPECT_EQ(*unpinned.cause, BreakCause::kVolatileLine);
  EXPECT_EQ(unpinned.conversation.pinned_system, "You help.\nToday is 2026-01-02.");
}

// Tool turns after one question keep that question's note (the values of when it was asked):
// the prefix the engine has cached reaches the tool results. A retry of the question, and the
// next question, get the current values.
TEST(IntakeTest, ToolTurnsAfterAQuestionKeepItsNoteAndARetryGetsTheCurrentValues) {
  const auto system = [](int minute) {
    return msg("system", fmt::format("You help.\nNow: 2026-01-01 10:{:02}.", minute));
  };
  const json call = {
      {"role", "assistant"},
      {"content", ""},
      {"tool_calls",
       json::array(
           {{{"id", "c1"}, {"type", "function"}, {"function", {{"name", "ls"}, {"arguments", "{}"}}}}})}};
  const json result = {{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "a.txt"}};
  const Stored s = after_turn(json::array({system(0), msg("user", "one")}), msg("assistant", "r1"));
  const json asked = json::array({system(1), msg("user", "one"), msg("assistant", "r1"), msg("user", "two")});
  Intake in = take(s.conversation, asked, false, false, s.request_messages);
  ASSERT_EQ(in.conversation.notes.count(3), 1u);
  const std::string asked_note = in.conversation.notes.at(3);
  EXPECT_NE(asked_note.find("10:01"), std::string::npos);
  Conversation stored = in.conversation;
  const uint64_t stored_request = stored.length;
  stored.append_reply(call);

  json tool_turn = asked;
  tool_turn[0] = system(2);
  tool_turn.push_back(call);
  tool_turn.push_back(result);
  in = take(stored, tool_turn, false, false, stored_request);
  EXPECT_FALSE(in.cause);  // nothing before the tool result changes
  EXPECT_EQ(in.conversation.notes.at(3), asked_note);

  json retry = asked;
  retry[0] = system(3);
  in = take(stored, retry, false, false, stored_request);
  ASSERT_EQ(in.conversation.notes.count(3), 1u);
  EXPECT_NE(in.conversation.notes.at(3).find("10:03"), std::string::npos);

  json next = tool_turn;
  next[0] = system(4);
  next.push_back(msg("assistant", "done"));
  next.push_back(msg("user", "three"));
  in = take(stored, next, false, false, stored_request);
  ASSERT_EQ(in.conversation.notes.count(7), 1u);
  EXPECT_NE(in.conversation.notes.at(7).find("10:04"), std::string::npos);
  EXPECT_EQ(in.conversation.notes.at(3), asked_note);
}

TEST(IntakeTest, ANamedClientWindowContinuesTheKeptHistoryPastTheDroppedTurns) {
  const json full = json::array({kSystem, msg("user", "one"), msg("assistant", "a1"), msg("user", "two"),
                                 msg("assistant", "a2"), msg("user", "three")});
  const Stored s = after_turn(full, msg("assistant", "a3"));
  // The client dropped its oldest exchange and goes on.
  const json window = json::array({kSystem, msg("user", "two"), msg("assistant", "a2"), msg("user", "three"),
                                   msg("assistant", "a3"), msg("user", "four")});
  const Intake in = take(s.conversation, window, true);
  EXPECT_TRUE(in.window_continued);
  EXPECT_FALSE(in.restarted);
  EXPECT_FALSE(in.cause);  // the engine's cached prefix (with the dropped turns) is kept
  json expected = full;
  expected.push_back(msg("assistant", "a3"));
  expected.push_back(msg("user", "four"));
  EXPECT_EQ(history(in.conversation), expected);
  EXPECT_EQ(in.first_new, 7u);
}

TEST(IntakeTest, AWindowRecognisedByContentGetsOnlyItsOwnMessages) {
  const json full = json::array({kSystem, msg("user", "one"), msg("assistant", "a1"), msg("user", "two"),
                                 msg("assistant", "a2"), msg("user", "three")});
  const Stored s = after_turn(full, msg("assistant", "a3"));
  const json window = json::array({kSystem, msg("user", "two"), msg("assistant", "a2"), msg("user", "three"),
                                   msg("assistant", "a3"), msg("user", "four")});
  const Intake in = take(s.conversation, window, false, true, s.request_messages);
  // What it still carries is kept (the history's positions stay); what it dropped goes.
  EXPECT_TRUE(in.window_kept);
  EXPECT_TRUE(in.window_front_moved);
  EXPECT_FALSE(in.restarted);
  EXPECT_FALSE(in.window_continued);
  EXPECT_EQ(in.evidence, Evidence::kNone);
  EXPECT_TRUE(in.conversation.client_windows);
  ASSERT_TRUE(in.cause);
  EXPECT_EQ(*in.cause, BreakCause::kClientTruncation);
  EXPECT_EQ(history(in.conversation), window);
  EXPECT_EQ(build_view(in.conversation), window);
  EXPECT_EQ(in.conversation.cut, 3u);
  EXPECT_EQ(in.first_new, 7u);
}

// After a compaction the cut is past the window's front: the request carries every kept
// message, so they stay where the engine has them cached; the summary does not (it stands for
// messages the request no longer carries).
TEST(IntakeTest, AWindowThatStillCarriesTheKeptMessagesKeepsTheCutButNotTheSummary) {
  json request = json::array({kSystem});
  for (int i = 1; i <= 4; ++i) {
    request.push_back(msg("user", "q" + std::to_string(i)));
    request.push_back(msg("assistant", "a" + std::to_string(i)));
  }
  request.push_back(msg("user", "q5"));
  Stored s = after_turn(request, msg("assistant", "a5"));
  Conversation& c = s.conversation;
  c.drop_front(5);  // as a compaction leaves it: q3 on, with a summary of q1..a2
  c.summary = SummaryNote{.text = "q1 and q2 were asked", .covers_until = 5, .anchor = 5};
  ASSERT_EQ(c.first_kept(), 5u);
  // The client's window dropped q1 and a1 only: it still carries q2, a2 (summarised) and all kept.
  json window = json::array({kSystem, msg("user", "q2"), msg("assistant", "a2"), msg("user", "q3"),
                             msg("assistant", "a3"), msg("user", "q4"), msg("assistant", "a4"), msg("user", "q5"),
                             msg("assistant", "a5"), msg("user", "q6")});
  const Intake in = take(c, window, false, true, s.request_messages);
  EXPECT_TRUE(in.window_kept);
  EXPECT_FALSE(in.window_front_moved);
  EXPECT_FALSE(in.conversation.summary);
  ASSERT_TRUE(in.cause);
  EXPECT_EQ(*in.cause, BreakCause::kClientTruncation);
  const json expected = json::array({kSystem, msg("user", "q3"), msg("assistant", "a3"), msg("user", "q4"),
                                     msg("assistant", "a4"), msg("user", "q5"), msg("assistant", "a5"),
                                     msg("user", "q6")});
  EXPECT_EQ(build_view(in.conversation), expected);
  EXPECT_EQ(in.first_new, 11u);

  // The next window, one exchange further: the same cut, the view only grows at its end.
  Conversation next = in.conversation;
  next.append_reply(msg("assistant", "a6"));
  json later = json::array({kSystem, msg("user", "q3"), msg("assistant", "a3"), msg("user", "q4"),
                            msg("assistant", "a4"), msg("user", "q5"), msg("assistant", "a5"), msg("user", "q6"),
                            msg("assistant", "a6"), msg("user", "q7")});
  const Intake again = take(next, later, false, true, 11);
  EXPECT_TRUE(again.window_kept);
  EXPECT_FALSE(again.cause);
  json grown = expected;
  grown.push_back(msg("assistant", "a6"));
  grown.push_back(msg("user", "q7"));
  EXPECT_EQ(build_view(again.conversation), grown);
}

// A window is no evidence for pinned values: the system message it sends is the one sent.
TEST(IntakeTest, AWindowDoesNotKeepPinnedValues) {
  const json first = json::array({msg("system", "You help.\nToday is 2026-01-01."), msg("user", "one"),
                                  msg("assistant", "a1"), msg("user", "two")});
  Stored s = after_turn(first, msg("assistant", "a2"));
  const json window = json::array({msg("system", "You help.\nToday is 2026-01-02."), msg("assistant", "a1"),
                                   msg("user", "two"), msg("assistant", "a2"), msg("user", "three")});
  const Intake in = take(s.conversation, window, false, true, s.request_messages);
  EXPECT_TRUE(in.window_kept);
  EXPECT_EQ(in.conversation.pinned_system, "You help.\nToday is 2026-01-02.");
  EXPECT_TRUE(in.volatile_now.empty());
  EXPECT_EQ(build_view(in.conversation)[0]["content"], "You help.\nToday is 2026-01-02.");
}

TEST(IntakeTest, AnEditOfEarlierMessagesIsNotTakenForAWindow) {
  const json full = json::array({kSystem, msg("user", "one"), msg("assistant", "a1"), msg("user", "two")});
  const Stored s = after_turn(full, msg("assistant", "a2"));
  // As many messages before the overlap as the kept history has: an edit, sent as it is.
  const json edited = json::array({kSystem, msg("user", "ONE"), msg("assistant", "a1"), msg("user", "two"),
                                   msg("assistant", "a2"), msg("user", "three")});
  const Intake in = take(s.conversation, edited, true);
  EXPECT_FALSE(in.window_continued);
  ASSERT_TRUE(in.cause);
  EXPECT_EQ(*in.cause, BreakCause::kClientEdit);
  EXPECT_EQ(history(in.conversation), edited);
}

// Recognised by content (an unnamed client), an edit of a middle message is no window either:
// the request still carries the conversation's first messages, so nothing was dropped from
// its front, and every message it carries is sent (before: taken for a window that began after
// the edit, whose front moved past four messages the client still sent).
TEST(IntakeTest, AnUnnamedEditOfAMiddleMessageIsSentWhole) {
  const json full = json::array({kSystem, msg("user", "one"), msg("assistant", "a1"), msg("user", "two"),
                                 msg("assistant", "a2"), msg("user", "three")});
  const Stored s = after_turn(full, msg("assistant", "a3"));
  const json edited = json::array({kSystem, msg("user", "one"), msg("assistant", "a1"), msg("user", "TWO"),
                                   msg("assistant", "a2"), msg("user", "three"), msg("assistant", "a3"),
                                   msg("user", "four")});
  const Intake in = take(s.conversation, edited, false, true, s.request_messages);
  EXPECT_FALSE(in.window_kept);
  EXPECT_FALSE(in.window_front_moved);
  EXPECT_TRUE(in.restarted);
  EXPECT_FALSE(in.conversation.client_windows);
  ASSERT_TRUE(in.cause);
  EXPECT_EQ(*in.cause, BreakCause::kClientEdit);
  EXPECT_EQ(in.cause_detail, "client history differs from message 3");
  EXPECT_EQ(history(in.conversation), edited);
  EXPECT_EQ(build_view(in.conversation), edited);
}

// An edit of the first message: as many messages before the stored ones as the history has
// is no window that dropped the first (the edited message is sent, not set aside).
TEST(IntakeTest, AnUnnamedEditOfTheFirstMessageIsSentWhole) {
  const json full = json::array({kSystem, msg("user", "one"), msg("assistant", "a1"), msg("user", "two")});
  const Stored s = after_turn(full, msg("assistant", "a2"));
  const json edited = json::array({kSystem, msg("user", "ONE"), msg("assistant", "a1"), msg("user", "two"),
                                   msg("assistant", "a2"), msg("user", "three")});
  const Intake in = take(s.conversation, edited, false, true, s.request_messages);
  EXPECT_FALSE(in.window_front_moved);
  ASSERT_TRUE(in.cause);
  EXPECT_EQ(*in.cause, BreakCause::kClientEdit);
  EXPECT_EQ(in.cause_detail, "client history differs from message 1");
  EXPECT_EQ(build_view(in.conversation), edited);
}

// A client that keeps its first message (the task) and drops the oldest turns after it: the
// window's front is after the task, and the task, which the request carries, is sent too.
TEST(IntakeTest, AWindowThatKeepsTheFirstMessageSendsIt) {
  const json full = json::array({kSystem, msg("user", "task"), msg("assistant", "a1"), msg("user", "two"),
                                 msg("assistant", "a2"), msg("user", "three")});
  const Stored s = after_turn(full, msg("assistant", "a3"));
  const json window = json::array({kSystem, msg("user", "task"), msg("assistant", "a2"), msg("user", "three"),
                                   msg("assistant", "a3"), msg("user", "four")});
  const Intake in = take(s.conversation, window, false, true, s.request_messages);
  EXPECT_FALSE(in.window_front_moved);
  EXPECT_TRUE(in.restarted);
  ASSERT_TRUE(in.cause);
  EXPECT_EQ(*in.cause, BreakCause::kClientTruncation);
  EXPECT_EQ(build_view(in.conversation), window);
}

}  // namespace
}  // namespace kvgate::session
