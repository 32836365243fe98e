// The isolation invariant (intake.h) on the gateway's own recognition, intake, compaction
// and view, driven the way a chat turn (gateway/turn.h) drives them, with a durable store in memory:
// the field reports' reproductions, then a property test over generated families of
// colliding clients, every upstream view checked by IsolationOracle.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include <fmt/format.h>

#include "session/compactor.h"
#include "session/intake.h"
#include "session/normalize.h"
#include "session/session.h"
#include "testing/client_families.h"
#include "testing/isolation_oracle.h"

namespace kvgate::session {
namespace {

using nlohmann::json;
using testing::IsolationOracle;
using MiniGateway = testing::MiniGateway;

json msg(const std::string& role, const std::string& content) { return {{"role", role}, {"content", content}}; }

std::string all_text(const json& view) { return view.dump(); }

const std::string kScope = scope_of_key("key-1");

TEST(IsolationTest, SameSystemPromptAndOneEqualMessageIsAnotherConversation) {
  MiniGateway gw;
  const json s = msg("system", "You are a helpful assistant.");
  const json a = json::array({s, msg("user", "my password is hunter2"), msg("assistant", "noted"), msg("user", "yes")});
  gw.send(kScope, std::nullopt, a, msg("assistant", "ok then"));
  const json b = json::array({s, msg("user", "what is the capital of France"), msg("assistant", "Paris"), msg("user", "yes")});
  auto t = gw.send(kScope, std::nullopt, b, msg("assistant", "good"));
  EXPECT_EQ(all_text(t.view).find("hunter2"), std::string::npos) << t.view.dump();
  EXPECT_EQ(t.view, b);
  EXPECT_EQ(t.how, "new");
}

TEST(IsolationTest, ASubAgentWithAFixedInstructionGetsOnlyItsOwnRun) {
  // Qwen Code's memory sub-agent: one system prompt, one fixed instruction, then this run's
  // material; run 2 must not be sent run 1's.
  MiniGateway gw;
  const json s = msg("system", "You extract memories. Today's date is 2026-12-01.");
  const json fixed = msg("user", "Extract the facts worth remembering from the conversation below.");
  const json run1 = json::array({s, fixed, msg("user", "run one: the user likes tea")});
  gw.send(kScope, std::nullopt, run1, msg("assistant", "likes tea"));
  const json run1b = json::array({s, fixed, msg("user", "run one: the user likes tea"), msg("assistant", "likes tea"),
                                  msg("user", "and coffee?")});
  gw.send(kScope, std::nullopt, run1b, msg("assistant", "no"));
  const json run2 = json::array({msg("system", "You extract memories. Today's date is 2026-12-02."), fixed,
                                 msg("user", "run two: the user moved to Oslo")});
  auto t = gw.send(kScope, std::nullopt, run2, msg("assistant", "Oslo"));
  EXPECT_EQ(all_text(t.view).find("tea"), std::string::npos) << t.view.dump();
  EXPECT_EQ(t.view, run2);
}

TEST(IsolationTest, AnotherDirectoryOrAnotherDayIsNotServedTheOldListingOrDate) {
  MiniGateway gw;
  const json s = msg("system", "You are a coding agent.");
  auto env = [](const std::string& date, const std::string& dir, const std::string& listing) {
    return msg("user", "Today's date is " + date + ".\nMy working directory is " + dir + "\nFiles:\n" + listing);
  };
  const json day1 = json::array({s, env("2026-12-01", "/home/u/alpha", "a.c\nb.c"), msg("user", "hi")});
  gw.send(kScope, std::nullopt, day1, msg("assistant", "hello"));
  // Another directory, same system prompt and the same fixed "hi".
  const json other_dir = json::array({s, env("2026-12-01", "/home/u/beta", "x.py"), msg("user", "hi")});
  auto t1 = gw.send(kScope, std::nullopt, other_dir, msg("assistant", "hello"));
  EXPECT_EQ(t1.view, other_dir);
  // The next day in the first directory: the date is in the first user message (masked for
  // recognition): the engine must get today's date.
  const json day2 = json::array({s, env("2026-12-02", "/home/u/alpha", "a.c\nb.c"), msg("user", "hi")});
  auto t2 = gw.send(kScope, std::nullopt, day2, msg("assistant", "hello"));
  EXPECT_EQ(t2.view, day2);
  EXPECT_EQ(all_text(t2.view).find("2026-12-01"), std::string::npos);
}

TEST(IsolationTest, ADailyOneShotRunGetsTodaysDate) {
  MiniGateway gw;
  const json day1 = json::array({msg("system", "date-day1 Today is 2026-12-01."), msg("user", "summarise my inbox")});
  gw.send(kScope, std::nullopt, day1, msg("assistant", "nothing new"));
  const json day2 = json::array({msg("system", "date-day1 Today is 2026-12-02."), msg("user", "summarise my inbox")});
  auto t = gw.send(kScope, std::nullopt, day2, msg("assistant", "two mails"));
  EXPECT_EQ(t.how, "prefix");
  EXPECT_EQ(t.view, day2) << t.view.dump();
  EXPECT_EQ(evidence_name(t.intake.evidence), std::string("none"));
}

TEST(IsolationTest, ARetryOfALaterTurnCarriesTheCurrentValuesInANote) {
  MiniGateway gw;
  const json s1 = msg("system", "Current time: 2026-12-01 10:00:00\nBe brief.");
  const json s2 = msg("system", "Current time: 2026-12-02 09:30:00\nBe brief.");
  const json t1 = json::array({s1, msg("user", "first")});
  gw.send(kScope, std::nullopt, t1, msg("assistant", "one"));
  const json t2 = json::array({s1, msg("user", "first"), msg("assistant", "one"), msg("user", "second")});
  gw.send(kScope, std::nullopt, t2, msg("assistant", "two"));
  // The client retries turn 2 a day later (our reply dropped): same conversation (it carries
  // "one"), the system stays pinned, and today's time reaches the model.
  json retry = t2;
  retry[0] = s2;
  auto t = gw.send(kScope, std::nullopt, retry, msg("assistant", "two again"));
  EXPECT_EQ(evidence_name(t.intake.evidence), std::string("history_echo"));
  EXPECT_NE(all_text(t.view).find("2026-12-02 09:30:00"), std::string::npos) << t.view.dump();
  EXPECT_EQ(t.view[0]["content"], s1["content"]);  // the cached prefix is kept
  IsolationOracle oracle;
  oracle.answered(kScope, std::nullopt, t1, msg("assistant", "one"));
  oracle.answered(kScope, std::nullopt, t2, msg("assistant", "two"));
  EXPECT_EQ(oracle.check(kScope, std::nullopt, retry, t.view), "");
}

// Tool turns after a question keep the question's note (intake.h): the values of when it was
// asked, not the request's. The oracle allows that only to a request that goes on after its
// newest user message; a request that ends at the question must bring the current values.
TEST(IsolationTest, AToolTurnKeepsItsQuestionsValuesAndTheOracleAllowsOnlyThat) {
  MiniGateway gw;
  IsolationOracle oracle;
  const auto system = [](int minute) { return msg("system", "You help.\nNow: 2026-01-01 10:0" + std::to_string(minute) + "."); };
  const json call = {{"role", "assistant"},
                     {"content", ""},
                     {"tool_calls", json::array({{{"id", "c1"}, {"type", "function"},
                                                  {"function", {{"name", "ls"}, {"arguments", "{}"}}}}})}};
  const json t1 = json::array({system(0), msg("user", "one")});
  gw.send(kScope, std::nullopt, t1, msg("assistant", "r1"));
  oracle.answered(kScope, std::nullopt, t1, msg("assistant", "r1"));
  const json t2 = json::array({system(1), msg("user", "one"), msg("assistant", "r1"), msg("user", "two")});
  gw.send(kScope, std::nullopt, t2, call);
  oracle.answered(kScope, std::nullopt, t2, call);
  json t3 = t2;
  t3[0] = system(2);
  t3.push_back(call);
  t3.push_back({{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "a.txt"}});
  const auto t = gw.send(kScope, std::nullopt, t3, msg("assistant", "done"));
  EXPECT_NE(all_text(t.view).find("10:01"), std::string::npos) << t.view.dump();  // the question's values
  EXPECT_EQ(all_text(t.view).find("10:02"), std::string::npos) << t.view.dump();
  EXPECT_EQ(oracle.check(kScope, std::nullopt, t3, t.view), "");
  // The same view for a request that ends at its question: the current values are missing.
  json asked_again = t2;
  asked_again[0] = system(2);
  json view = t.view;
  view.erase(view.size() - 1);
  view.erase(view.size() - 1);
  EXPECT_NE(oracle.check(kScope, std::nullopt, asked_again, view), "");
}

TEST(IsolationTest, TwoKeysNeverShareAConversationByIdOrByContent) {
  MiniGateway gw;
  const std::string key2 = scope_of_key("key-2");
  const json a = json::array({msg("system", "S"), msg("user", "secret of key one")});
  auto t1 = gw.send(kScope, std::string("shared-id"), a, msg("assistant", "kept"));
  // The same id and the same content under key 2: another session, nothing of key 1's.
  json b = a;
  b.push_back(msg("assistant", "kept"));
  b.push_back(msg("user", "and?"));
  auto t2 = gw.send(key2, std::string("shared-id"), json::array({msg("system", "S"), msg("user", "and?")}), msg("assistant", "x"));
  EXPECT_NE(t2.session, t1.session);
  EXPECT_EQ(all_text(t2.view).find("secret"), std::string::npos);
  auto t3 = gw.send(key2, std::nullopt, b, msg("assistant", "y"));
  EXPECT_NE(t3.session, t1.session);
  EXPECT_EQ(t3.how, "new");
  EXPECT_EQ(gw.table().get(t1.session->id, key2), nullptr);
  for (const auto& s : gw.table().list(key2)) EXPECT_NE(s, t1.session);
}

TEST(IsolationTest, ASlidingWindowWithoutAnIdIsSentItsOwnWindowInItsSlot) {
  MiniGateway gw;
  json h = json::array({msg("system", "S")});
  for (int i = 0; i < 6; ++i) h.push_back(msg(i % 2 ? "assistant" : "user", "m" + std::to_string(i)));
  h.push_back(msg("user", "u6"));
  auto t1 = gw.send(kScope, std::nullopt, h, msg("assistant", "r6"));
  json next = json::array({msg("system", "S")});
  for (size_t i = 3; i < h.size(); ++i) next.push_back(h[i]);
  next.push_back(msg("assistant", "r6"));
  next.push_back(msg("user", "u7"));
  auto t2 = gw.send(kScope, std::nullopt, next, msg("assistant", "r7"));
  EXPECT_EQ(t2.how, "window");
  EXPECT_EQ(t2.session, t1.session);  // its slot and cache
  EXPECT_EQ(t2.view, next);           // nothing it dropped
}

TEST(IsolationTest, ASlidingWindowOfItsOwnAssistantTurnsStaysOneSession) {
  // A replayed trace with a window: the client sends its own assistant turns, not ours.
  MiniGateway gw;
  json h = json::array();
  std::shared_ptr<Session> first;
  for (int i = 0; i < 12; ++i) {
    h.push_back(msg("user", "u" + std::to_string(i)));
    json window = json::array({msg("system", "S")});
    for (size_t k = h.size() > 6 ? h.size() - 6 : 0; k < h.size(); ++k) window.push_back(h[k]);
    if (window[1]["role"] != "user") window.erase(window.begin() + 1);
    auto t = gw.send(kScope, std::nullopt, window, msg("assistant", "ours " + std::to_string(i)));
    if (!first) first = t.session;
    EXPECT_EQ(t.session, first) << "turn " << i << " " << t.how;
    EXPECT_EQ(t.view, window);
    h.push_back(msg("assistant", "trace's " + std::to_string(i)));
  }
}

// A summary of the conversation as the model writes it when a client asks for one before it
// replaces its history (Claude Code's auto-compaction prompt asks for this layout).
const std::string kAnalysed =
    "<analysis>\nThe user asked for the failing build to be fixed; I read the CMake files first.\n</analysis>\n"
    "<summary>\n1. Primary request: fix the failing build of the project's tests.\n"
    "2. Cause found: the linker flag for the filesystem library was missing.\n"
    "3. Pending: run the whole test suite again after the fix is in.\n</summary>";
// The continuation Claude Code sends: the analysis dropped, the summary re-wrapped.
const std::string kContinued =
    "This session is being continued from a previous conversation that ran out of context. The "
    "conversation is summarized below:\nSummary:\n1. Primary request: fix the failing build of the project's "
    "tests.\n\n2. Cause found: the linker flag for the filesystem library was missing.\n"
    "3. Pending: run the whole test suite again after the fix is in.\nPlease continue.";

// One client's turns up to the reply that holds its summary; returns the history it had.
json summarised(MiniGateway& gw, const std::string& scope, const std::string& system, const std::string& task,
                const std::string& summary, std::shared_ptr<Session>* session) {
  json h = json::array({msg("system", system), msg("user", task)});
  auto t = gw.send(scope, std::nullopt, h, msg("assistant", "done: " + task));
  h.push_back(msg("assistant", "done: " + task));
  h.push_back(msg("user", "Your task is to create a detailed summary of the conversation so far."));
  auto s = gw.send(scope, std::nullopt, h, msg("assistant", summary));
  EXPECT_EQ(s.session, t.session);
  *session = t.session;
  return h;
}

TEST(IsolationTest, ASelfSummarisingClientGoesOnInItsSessionWithOnlyItsSummary) {
  MiniGateway gw;
  std::shared_ptr<Session> first;
  summarised(gw, kScope, "S", "fix the build", kAnalysed, &first);
  const json next = json::array({msg("system", "S"), msg("user", kContinued)});
  auto t = gw.send(kScope, std::nullopt, next, msg("assistant", "running the tests"));
  EXPECT_EQ(t.how, "continuation");
  EXPECT_EQ(t.session, first);  // its slot: the engine still has the system prompt
  EXPECT_EQ(t.view, next);      // nothing of the history it replaced
  ASSERT_TRUE(t.intake.cause.has_value());
  EXPECT_EQ(cause_name(*t.intake.cause), std::string("client_edit"));
  EXPECT_EQ(t.intake.evidence, Evidence::kNone);
}

TEST(IsolationTest, ParallelSelfSummarisingClientsEachGoOnInTheirOwnSession) {
  MiniGateway gw;
  std::shared_ptr<Session> a, b;
  summarised(gw, kScope, "S", "fix the build", kAnalysed, &a);
  const std::string other =
      "1. Primary request: translate the user guide of the project into German.\n"
      "2. Done so far: chapters one to three, the glossary kept in terms.csv.\n"
      "3. Pending: chapter four and a review of the glossary by the user.";
  summarised(gw, kScope, "S", "translate the guide", other, &b);
  ASSERT_NE(a, b);
  auto tb = gw.send(kScope, std::nullopt, json::array({msg("system", "S"), msg("user", "Summary:\n" + other)}),
                    msg("assistant", "chapter four"));
  auto ta = gw.send(kScope, std::nullopt, json::array({msg("system", "S"), msg("user", kContinued)}),
                    msg("assistant", "tests"));
  EXPECT_EQ(tb.session, b);
  EXPECT_EQ(ta.session, a);
}

TEST(IsolationTest, ALineOrTwoOfAnotherReplyOrAnotherKeysReplyIsANewConversation) {
  MiniGateway gw;
  std::shared_ptr<Session> first;
  const std::string long_summary = kAnalysed + "\n4. Also: the CI cache is kept outside the checkout now.\n"
                                   "5. Also: the arm64 cross build needs its own compiler cache.\n"
                                   "6. Also: the docs mention the new flag in OPERATIONS.md.";
  summarised(gw, kScope, "S", "fix the build", long_summary, &first);
  // One of its seven lines, quoted by another conversation with the same system prompt.
  auto quoted = gw.send(kScope, std::nullopt,
                        json::array({msg("system", "S"), msg("user", "As before: 2. Cause found: the linker flag for "
                                                                     "the filesystem library was missing.\nWhy?")}),
                        msg("assistant", "because"));
  EXPECT_EQ(quoted.how, "new");
  // The whole summary under another key.
  auto other_key = gw.send(scope_of_key("key-2"), std::nullopt,
                           json::array({msg("system", "S"), msg("user", "Summary:\n" + long_summary)}),
                           msg("assistant", "ok"));
  EXPECT_EQ(other_key.how, "new");
  EXPECT_NE(other_key.session, first);
  // Another system prompt.
  auto other_system = gw.send(kScope, std::nullopt,
                              json::array({msg("system", "T"), msg("user", "Summary:\n" + long_summary)}),
                              msg("assistant", "ok"));
  EXPECT_EQ(other_system.how, "new");
}

TEST(IsolationTest, ANamedSlidingWindowContinuesItsKeptHistory) {
  MiniGateway gw;
  json h = json::array({msg("system", "S")});
  for (int i = 0; i < 6; ++i) h.push_back(msg(i % 2 ? "assistant" : "user", "m" + std::to_string(i)));
  gw.send(kScope, std::string("agent"), h, msg("assistant", "r"));
  json next = json::array({msg("system", "S")});
  for (size_t i = 3; i < h.size(); ++i) next.push_back(h[i]);
  next.push_back(msg("assistant", "r"));
  next.push_back(msg("user", "u"));
  auto t = gw.send(kScope, std::string("agent"), next, msg("assistant", "r2"));
  EXPECT_TRUE(t.intake.window_continued);
  EXPECT_NE(all_text(t.view).find("m0"), std::string::npos);  // its own earlier history
}

TEST(IsolationTest, ANamedConversationWithAnEditedEarlierMessageIsSentTheEdit) {
  // Not a window: as many messages before the common part as before, one of them changed.
  MiniGateway gw;
  json h = json::array({msg("system", "S"), msg("user", "the build is green")});
  gw.send(kScope, std::string("agent"), h, msg("assistant", "ok"));
  h.push_back(msg("assistant", "ok"));
  h.push_back(msg("user", "next"));
  gw.send(kScope, std::string("agent"), h, msg("assistant", "done"));
  h.push_back(msg("assistant", "done"));
  h.push_back(msg("user", "and then?"));
  h[1]["content"] = "the build is red";
  auto t = gw.send(kScope, std::string("agent"), h, msg("assistant", "fix it"));
  EXPECT_FALSE(t.intake.window_continued);
  EXPECT_EQ(t.view, h);
  ASSERT_TRUE(t.intake.cause.has_value());
  EXPECT_EQ(cause_name(*t.intake.cause), std::string("client_edit"));
  // The same edit in a conversation that also dropped its first turn is still its own text.
  json w = json::array({msg("system", "S"), msg("user", "the build is red, again")});
  for (size_t i = 2; i < h.size(); ++i) w.push_back(h[i]);
  w.push_back(msg("assistant", "fix it"));
  w.push_back(msg("user", "ok"));
  auto t2 = gw.send(kScope, std::string("agent"), w, msg("assistant", "fine"));
  EXPECT_EQ(all_text(t2.view).find("the build is green"), std::string::npos) << t2.view.dump();
  EXPECT_NE(all_text(t2.view).find("the build is red, again"), std::string::npos) << t2.view.dump();
}

TEST(IsolationTest, AVolatileValueChangedInAnEarlierMessageKeepsItsPinnedVersionAndNotesTheNewOne) {
  MiniGateway gw;
  const json t1 = json::array({msg("system", "S"), msg("user", "meeting on 2026-12-01 at 10:00")});
  gw.send(kScope, std::nullopt, t1, msg("assistant", "ok"));
  json t2 = t1;
  t2[1]["content"] = "meeting on 2026-12-03 at 11:00";  // the client changed the date in place
  t2.push_back(msg("assistant", "ok"));
  t2.push_back(msg("user", "remind me"));
  auto t = gw.send(kScope, std::nullopt, t2, msg("assistant", "sure"));
  // The request carries the last one up to volatile values and kvgate's reply: the message
  // sent before stays, the current line reaches the model in the note.
  EXPECT_EQ(evidence_name(t.intake.evidence), std::string("history_echo"));
  ASSERT_EQ(t.view.size(), 4U);
  EXPECT_EQ(t.view[1], t1[1]);
  EXPECT_NE(t.view[3]["content"].get<std::string>().find("meeting on 2026-12-03 at 11:00"), std::string::npos);
  IsolationOracle oracle;
  oracle.answered(kScope, std::nullopt, t1, msg("assistant", "ok"));
  EXPECT_EQ(oracle.check(kScope, std::nullopt, t2, t.view), "");
  // The newest user message is the question: a retry with another date is sent as it is.
  json t3 = t2;
  t3[3]["content"] = "meeting on 2026-12-04 at 11:00";
  json t4 = t2;
  t4[3]["content"] = "meeting on 2026-12-05 at 11:00";
  gw.send(kScope, std::nullopt, t3, msg("assistant", "noted"));
  auto retry = gw.send(kScope, std::nullopt, t4, msg("assistant", "noted"));
  EXPECT_NE(retry.view.back()["content"].get<std::string>().rfind("meeting on 2026-12-05 at 11:00", 0), std::string::npos);
}

TEST(IsolationTest, AClientSendingItsOwnAssistantTurnsKeepsItsPinnedClock) {
  // A replayed trace: the history carries the trace's assistant messages, not our replies.
  MiniGateway gw;
  json h = json::array({msg("system", "Current time: 2026-12-01 10:00:00\nWork.")});
  std::vector<MiniGateway::Turn> turns;
  for (int i = 0; i < 4; ++i) {
    h[0]["content"] = fmt::format("Current time: 2026-12-01 10:0{}:00\nWork.", i);
    h.push_back(msg("user", "step " + std::to_string(i)));
    turns.push_back(gw.send(kScope, std::nullopt, h, msg("assistant", "our reply " + std::to_string(i))));
    h.push_back(msg("assistant", "trace reply " + std::to_string(i)));
  }
  // Turn 2 carries no assistant turn of the stored history yet: rebuilt; from turn 3 on the
  // first system message stays upstream and the clock travels in the note.
  EXPECT_EQ(evidence_name(turns[1].intake.evidence), std::string("none"));
  EXPECT_EQ(evidence_name(turns[3].intake.evidence), std::string("history_echo"));
  EXPECT_EQ(turns[3].view[0]["content"], turns[2].view[0]["content"]);
  EXPECT_NE(all_text(turns[3].view).find("10:03:00"), std::string::npos);
}

TEST(IsolationTest, SharedFewShotTurnsDoNotCarryAnotherRequestsValues) {
  MiniGateway gw;
  auto few_shot = [](const std::string& clock, const std::string& ask) {
    return json::array({msg("system", "Current time: " + clock + "\nAnswer like the example."),
                        msg("user", "example question"), msg("assistant", "example answer"), msg("user", ask)});
  };
  gw.send(kScope, std::nullopt, few_shot("2026-12-01 08:00:00", "meeting on 2026-12-01"), msg("assistant", "ok"));
  // Another person: the same examples, a question that differs only in a date.
  const json b = few_shot("2026-12-01 09:15:00", "meeting on 2026-12-09");
  auto t = gw.send(kScope, std::nullopt, b, msg("assistant", "ok"));
  EXPECT_EQ(t.view, b) << t.view.dump();
}

// ---- Property test: families of colliding clients (testing/client_families.h) ----------
// Here on recognition, intake and compaction as MiniGateway drives them, summaries included
// (traceable_summary); gateway/isolation_turn_test.cc runs the same families through the real
// chat turn.

TEST(IsolationPropertyTest, ThousandsOfCollidingConversationsNeverMix) {
  int cases = 0, requests = 0;
  size_t continuations = 0;
  for (uint32_t seed = 1; seed <= 2000; ++seed) {
    testing::ClientFamilies f(seed);
    const int steps = 12 + static_cast<int>(seed % 13);
    MiniGateway gw(f.small_table() ? 3 : 1024, seed % 4 == 0 ? 900 : 0);  // a quarter compact (small budget)
    const std::string failure =
        f.run(steps, [&](const std::string& key, const std::optional<std::string>& id, const json& messages,
                         const json& reply) {
          auto t = gw.send(scope_of_key(key), id, messages, reply);
          return testing::SentView{t.view, t.how, std::string(evidence_name(t.intake.evidence))};
        });
    ASSERT_EQ(failure, "") << "seed " << seed;
    ++cases;
    requests += steps;
    continuations += f.continuations;
  }
  EXPECT_EQ(cases, 2000);
  EXPECT_GT(continuations, 100u);  // the self-summary path is exercised
  RecordProperty("continuations", static_cast<int>(continuations));
  RecordProperty("requests", requests);
}

TEST(IsolationPropertyTest, TheOracleCatchesWhatTheOldRecognitionDid) {
  // The oracle itself must fail on the leak the field report found: B sent A's history.
  IsolationOracle oracle;
  const json s = msg("system", "S");
  const json a = json::array({s, msg("user", "my password is hunter2"), msg("assistant", "noted"), msg("user", "yes")});
  oracle.answered(kScope, std::nullopt, a, msg("assistant", "ok"));
  const json b = json::array({s, msg("user", "capital of France?"), msg("assistant", "Paris"), msg("user", "yes")});
  const json leaked = json::array({s, msg("user", "my password is hunter2"), msg("assistant", "noted"), msg("user", "yes")});
  EXPECT_NE(oracle.check(kScope, std::nullopt, b, leaked), "");
  // Day 1's date without today's: caught too.
  const json d1 = json::array({msg("system", "Today is 2026-12-01."), msg("user", "go")});
  oracle.answered(kScope, std::nullopt, d1, msg("assistant", "went"));
  const json d2 = json::array({msg("system", "Today is 2026-12-02."), msg("user", "go")});
  EXPECT_NE(oracle.check(kScope, std::nullopt, d2, d1), "");
  EXPECT_EQ(oracle.check(kScope, std::nullopt, d2, d2), "");
}

}  // namespace
}  // namespace kvgate::session
