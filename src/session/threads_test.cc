// Threads under one client id (threads.h): the rule's pieces, opencode's recorded title and
// agent requests, and a property test over generated families of clients that share ids and
// interleave side requests (titles, summaries, sub-agents, quota checks) with their main
// thread, every view checked by IsolationOracle against the request's own thread.
#include "session/threads.h"

#include <fstream>
#include <random>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "session/intake.h"
#include "session/normalize.h"
#include "session/session.h"
#include "testing/isolation_oracle.h"
#include "testing/paths.h"

namespace kvgate::session {
namespace {

using nlohmann::json;
using testing::IsolationOracle;
using MiniGateway = testing::MiniGateway;

json msg(const std::string& role, const std::string& content) {
  return {{"role", role}, {"content", content}};
}

const std::string kScope = scope_of_key("key-1");

ThreadKeys keys_of(const json& history, uint64_t tools = 0) {
  Conversation c;
  for (size_t i = 0; i < history.size(); ++i) {
    if (i + 1 == history.size() && history[i].value("role", "") == "assistant") {
      c.append_reply(history[i]);  // the reply kvgate returned
    } else {
      c.append(history[i]);
    }
  }
  c.tools = tools;
  Session s("x");
  s.conversation = c;
  s.last_request_messages = c.replies.empty() ? c.length : c.length - 1;
  return thread_keys_of(s);
}

TEST(ThreadsTest, ARequestBelongsToTheThreadWhoseHistoryItExtends) {
  const json main = json::array({msg("system", "You are an agent. Today is 2026-12-01."),
                                 msg("user", "fix the bug"), msg("assistant", "done")});
  const ThreadKeys thread = keys_of(main);
  json next = main;
  next[0]["content"] = "You are an agent. Today is 2026-12-02.";  // volatile values only
  next.push_back(msg("user", "thanks"));
  EXPECT_TRUE(thread_fit(thread, RequestKeys::of(next)).belongs);
  EXPECT_EQ(thread_fit(thread, RequestKeys::of(next)).shared, 3U);
  // Another system prompt (a title request) or another tool set: another thread.
  json title = json::array({msg("system", "You write titles."), msg("user", "fix the bug")});
  EXPECT_FALSE(thread_fit(thread, RequestKeys::of(title)).belongs);
  EXPECT_FALSE(thread_fit(thread, RequestKeys::of(next, 42)).belongs);
  // Same system prompt, but nothing of the thread's history: a sibling (a sub-agent's task).
  const json sub = json::array({main[0], msg("user", "search the repository for TODO")});
  EXPECT_FALSE(thread_fit(thread, RequestKeys::of(sub)).belongs);
  // A later window that carries the thread's last message belongs to it.
  const json window =
      json::array({main[0], msg("assistant", "done"), msg("user", "and now?")});  // "done": its last reply
  EXPECT_TRUE(thread_fit(thread, RequestKeys::of(window)).belongs);
}

TEST(ThreadsTest, ThreadIdsCannotBeNamedByAnotherFamily) {
  EXPECT_EQ(thread_session_id(kScope, "abc", 1), scoped_session_id(kScope, "abc"));
  EXPECT_NE(thread_session_id(kScope, "abc", 2), scoped_session_id(kScope, "abc~2"));
  EXPECT_NE(thread_session_id(kScope, "abc", 2), scoped_session_id(kScope, ".2~abc"));
  EXPECT_EQ(thread_session_id(kScope, "abc", 2).find(scoped_session_id(kScope, "")), std::string::npos);
}

TEST(ThreadsTest, TheSameFirstRequestAgainBeforeItsAnswerJoinsItsThread) {
  // A client that sends its first turn again before the answer came (an early retry, or a
  // burst of the same request): one thread, not a sibling per copy.
  SessionTable table;
  const json first = json::array({msg("system", "You are an agent."), msg("user", "fix the bug")});
  auto a = table.find_or_create(kScope, RequestKeys::of(first), std::string("ses-1"));
  auto b = table.find_or_create(kScope, RequestKeys::of(first), std::string("ses-1"));
  EXPECT_TRUE(a.created);
  EXPECT_EQ(a.session, b.session);
  EXPECT_FALSE(b.created);
  // Another request under the id while the first is still unanswered is still a sibling.
  const json other = json::array({msg("system", "You are an agent."), msg("user", "write the docs")});
  auto c = table.find_or_create(kScope, RequestKeys::of(other), std::string("ses-1"));
  EXPECT_NE(c.session, a.session);
  const json title = json::array({msg("system", "You write titles."), msg("user", "fix the bug")});
  auto d = table.find_or_create(kScope, RequestKeys::of(title), std::string("ses-1"));
  EXPECT_NE(d.session, a.session);
  EXPECT_NE(d.session, c.session);
}

// ---- opencode's recorded requests ------------------------------------------------------

const std::filesystem::path kOpencode =
    std::filesystem::path(kvgate::testing::source_dir()) / "tests/fixtures/agents/opencode";

json recorded(const std::string& name) {
  std::ifstream in(kOpencode / name);
  json j = json::parse(in, nullptr, false);
  return j.is_discarded() ? json() : j.value("request", json()).value("body", json());
}

TEST(ThreadsTest, OpencodesTitleRequestAndAgentRequestAreTwoThreads) {
  // opencode 1.18.33, one `opencode run`: the title request and the agent's first and second
  // turns, all under one x-session-id (tests/fixtures/agents/opencode/README.md).
  const json title = recorded("run1-001.json");
  const json agent1 = recorded("run1-002.json");
  const json agent2 = recorded("continue-001.json");
  ASSERT_TRUE(title.is_object() && agent1.is_object() && agent2.is_object()) << kOpencode;
  MiniGateway gw;
  IsolationOracle oracle;
  const std::string id = "ses_recorded";
  auto send = [&](const json& body, const std::string& thread) {
    const json& messages = body["messages"];
    auto t = gw.send(kScope, id, messages, msg("assistant", "a reply"), tools_hash(body));
    EXPECT_EQ(oracle.check(kScope, id, messages, t.view, thread), "") << thread;
    EXPECT_EQ(IsolationOracle::check_complete(messages, t.view), "") << thread;
    oracle.answered(kScope, id, messages, msg("assistant", "a reply"), thread);
    return t;
  };
  auto t0 = send(title, "title");
  auto t1 = send(agent1, "agent");
  EXPECT_NE(t0.session, t1.session);
  EXPECT_EQ(t1.view.dump().find("Generate a title for this conversation"), std::string::npos);
  EXPECT_EQ(t1.view, agent1["messages"]);
  // The agent's second turn extends its first: the same thread (its recorded history carries
  // the engine's first answer, not the stand-in reply above, so it branches after it).
  auto t2 = send(agent2, "agent");
  EXPECT_EQ(t2.session, t1.session);
  EXPECT_EQ(t2.view.dump().find("Generate a title for this conversation"), std::string::npos);
}

// ---- Property test: families of threads under shared ids ------------------------------

struct ThreadClient {
  std::string name;  // the client's own thread: "main", "title-3", "sub-1", ...
  std::string family;
  uint64_t tools = 0;
  json history;
  std::string last_reply;  // the text of the last reply it was given
};

class ThreadFamilies {
 public:
  explicit ThreadFamilies(uint32_t seed) : rng_(seed) {}

  std::string run(int steps, uint64_t high) {
    MiniGateway gw(pick(4) == 0 ? 4 : 1024, high);
    IsolationOracle oracle;
    std::vector<ThreadClient> mains;
    for (int f = 0; f < 2; ++f) {
      ThreadClient c{"main", "ses-" + std::to_string(pick(2)), 7, json::array({system("agent", f)})};
      mains.push_back(std::move(c));  // two mains may share an id: two families' mains are threads too
      mains.back().name = "main-" + std::to_string(f);
    }
    std::vector<ThreadClient> subs;
    for (int step = 0; step < steps; ++step) {
      ThreadClient& main = mains[pick(mains.size())];
      ThreadClient* c = &main;
      ThreadClient side;
      // A title or summary of a main thread that has said nothing yet would be the same
      // request for every main: one thread by content. They come once it has.
      size_t what = pick(12);
      if (what < 2 && main.history.size() < 2) what = 11;
      switch (what) {
        case 0:  // opencode's title request: its own prompt, the instruction, the user's message
          side = {"title-of-" + main.name, main.family, 0,
                  json::array({system("title", step), msg("user", "Generate a title for this conversation:"),
                               first_user(main)})};
          c = &side;
          break;
        case 1:  // a summary of the main thread, by a summariser with its own prompt
          side = {"summary-of-" + main.name, main.family, 0, json::array({system("summary", step)})};
          for (size_t i = 1; i < main.history.size(); ++i) side.history.push_back(main.history[i]);
          side.history.push_back(msg("user", "Provide a detailed summary of our conversation above."));
          c = &side;
          break;
        case 2:  // a quota check, no system prompt
          side = {"quota", main.family, 0, json::array({msg("user", "quota")})};
          c = &side;
          break;
        case 3: {  // a sub-agent: a task of its own, then its own turns
          if (subs.size() < 3 || pick(2) == 0) {
            const bool same_prompt = pick(2) == 0;  // sub-agents may share the main prompt and tools
            subs.push_back({fmt::format("sub-{}", step), main.family, same_prompt ? main.tools : 3,
                            json::array({same_prompt ? main.history[0] : system("sub", step),
                                         msg("user", fmt::format("task {}: {}", step, words(3)))})});
          }
          c = &subs[pick(subs.size())];
          c->history.push_back(msg("user", words(2)));
          break;
        }
        default:
          act(main, step);
          break;
      }
      const json request = c->history;
      const json reply =
          msg("assistant", pick(3) == 0 ? summary_text(step) : words(2) + std::to_string(step));
      auto t = gw.send(kScope, c->family, request, reply, c->tools);
      const std::string thread = c->family + "/" + c->name;
      if (auto e = oracle.check(kScope, c->family, request, t.view, thread); !e.empty()) {
        return fmt::format("step {} ({}, {}): {}\nrequest: {}\nview: {}", step, thread, t.how, e,
                           request.dump().substr(0, 1500), t.view.dump().substr(0, 1500));
      }
      if (t.session->conversation.generation == 0) {
        if (auto e = IsolationOracle::check_complete(request, t.view); !e.empty()) {
          return fmt::format("step {} ({}): {}\nview: {}", step, thread, e, t.view.dump().substr(0, 1500));
        }
      }
      oracle.answered(kScope, c->family, request, reply, thread);
      if (c != &side && pick(10) != 0) c->history.push_back(reply);  // else a retry comes next
      c->last_reply = reply["content"];
    }
    return "";
  }

 private:
  size_t pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }
  std::string words(int n) {
    static const char* kWords[] = {"yes",   "fix",  "the",   "file",   "tests",
                                   "build", "done", "error", "main.c", "run"};
    std::string out;
    for (int i = 0; i < n; ++i) out += (i ? " " : "") + std::string(kWords[pick(std::size(kWords))]);
    return out;
  }
  json system(const std::string& role, int day) {
    std::string text = fmt::format("You are the {} of a coding agent.", role);
    if (pick(2) == 0) text = fmt::format("Today's date: 2026-12-{:02}\n", 1 + day % 28) + text;
    return msg("system", text);
  }
  static json first_user(const ThreadClient& c) {
    for (const auto& m : c.history) {
      if (m.value("role", "") == "user") return m;
    }
    return msg("user", "hello from " + c.name);  // two mains' identical requests would be one thread
  }
  std::string summary_text(int step) {
    std::string text;
    for (size_t i = 0, n = 2 + pick(3); i < n; ++i) {
      text += fmt::format("{} {}: point {} of the summary written at step {}\n", words(3), words(2), i, step);
    }
    return text;
  }
  // The main thread's own next step: a new message, its clock moving, a window, an edit, a
  // self-summary (the history replaced by the last reply it got), or a new run of the agent.
  void act(ThreadClient& c, int step) {
    json& h = c.history;
    switch (pick(8)) {
      case 0:
        h[0] = system("agent", step);
        break;
      case 1:
        if (h.size() > 4)
          h.erase(h.begin() + 1,
                  h.begin() + 1 + static_cast<std::ptrdiff_t>(std::min<size_t>(h.size() - 3, 2)));
        break;
      case 2:
        if (h.size() > 2) h[1 + pick(h.size() - 1)] = msg("user", words(4));
        break;
      case 3:
        if (!c.last_reply.empty()) {
          h = json::array(
              {h[0], msg("user", "This session is being continued from a previous conversation.\nSummary:\n" +
                                     c.last_reply)});
          return;
        }
        break;
      case 4:
        h = json::array({h[0]});
        break;
      default:
        break;
    }
    h.push_back(msg("user", words(3) + " " + std::to_string(step)));
  }
  std::mt19937 rng_;
};

TEST(ThreadsPropertyTest, SideRequestsUnderOneIdNeverLendOrBorrowContent) {
  int requests = 0;
  for (uint32_t seed = 1; seed <= 1000; ++seed) {
    ThreadFamilies f(seed);
    const int steps = 10 + static_cast<int>(seed % 15);
    const std::string failure = f.run(steps, seed % 4 == 0 ? 900 : 0);  // a quarter compact
    ASSERT_EQ(failure, "") << "seed " << seed;
    requests += steps;
  }
  RecordProperty("requests", requests);
}

}  // namespace
}  // namespace kvgate::session
