// The isolation invariant end to end: real clients' shapes through the gateway to the real
// pinned llama-server, every prompt kvgate sends upstream recorded and judged by
// IsolationOracle (what the engine was asked), plus the engine's own token counts.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include <fmt/format.h>

#include "testing/gateway_e2e.h"
#include "testing/isolation_oracle.h"

namespace kvgate::gateway {

using session::scope_of_key;

namespace {

using nlohmann::json;
using testing::Engine;
using testing::Front;
using testing::IsolationOracle;
using testing::plain_chat;
using testing::post_json;
using testing::RecordingUpstream;

json msg(const std::string& role, const std::string& content) { return {{"role", role}, {"content", content}}; }

class IsolationE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { engine_ = Engine::start({.context = 8192, .slots = 2}).release(); }
  static void TearDownTestSuite() {
    delete engine_;
    engine_ = nullptr;
  }
  void SetUp() override {
    upstream_ = std::make_shared<RecordingUpstream>([] { return engine_->endpoint(); });
    GatewayOptions o;
    o.slots = 2;
    o.api_keys = {"key-one", "key-two"};
    front_ = std::make_unique<Front>(upstream_, o);
  }
  // POSTs a chat as `key`; returns the answer and the messages kvgate sent upstream for it.
  struct Sent {
    testing::JsonAnswer answer;
    json upstream;  // messages
  };
  Sent chat(const std::string& key, const json& messages, httplib::Headers headers = {}) {
    headers.emplace("Authorization", "Bearer " + key);
    auto c = front_->client();
    const size_t before = upstream_->chat_bodies().size();
    Sent s{post_json(c, "/v1/chat/completions", plain_chat(messages, 4), headers), nullptr};
    const auto bodies = upstream_->chat_bodies();
    if (bodies.size() > before) s.upstream = without_marks(bodies.back()["messages"]);
    return s;
  }
  // The messages without the empty reasoning kvgate puts on assistant messages so that the
  // template renders a past reply as it was generated (Gateway::upstream_view): no content.
  static json without_marks(json messages) {
    for (auto& m : messages) {
      if (m.is_object() && m.value("reasoning_content", json()) == "\n") m.erase("reasoning_content");
    }
    return messages;
  }
  static json reply_of(const Sent& s) { return s.answer.body["choices"][0]["message"]; }
  static uint64_t prompt_tokens(const Sent& s) { return s.answer.body["usage"]["prompt_tokens"]; }
  static uint64_t cached_tokens(const Sent& s) { return s.answer.body["usage"]["prompt_tokens_details"]["cached_tokens"]; }

  static Engine* engine_;
  std::shared_ptr<RecordingUpstream> upstream_;
  std::unique_ptr<Front> front_;
};
Engine* IsolationE2eTest::engine_ = nullptr;

const std::string kScope1 = scope_of_key("key-one");

TEST_F(IsolationE2eTest, AnotherPersonsYesIsNotAnsweredFromTheFirstPersonsHistory) {
  const json s = msg("system", "You are a helpful assistant. Answer briefly and precisely.");
  const json a = json::array({s, msg("user", "my password is hunter2"), msg("assistant", "noted"), msg("user", "yes")});
  auto ra = chat("key-one", a);
  ASSERT_EQ(ra.answer.status, 200) << ra.answer.raw;
  const json b = json::array(
      {s, msg("user", "what is the capital of France"), msg("assistant", "Paris"), msg("user", "yes")});
  auto rb = chat("key-one", b);
  ASSERT_EQ(rb.answer.status, 200) << rb.answer.raw;
  EXPECT_EQ(rb.upstream, b);
  EXPECT_EQ(rb.upstream.dump().find("hunter2"), std::string::npos);
  // The engine counted B's own prompt: as many tokens as B alone in a conversation of its own.
  auto alone = chat("key-one", b, {{"X-Session-Id", "b-alone"}});
  ASSERT_EQ(alone.answer.status, 200) << alone.answer.raw;
  EXPECT_EQ(prompt_tokens(rb), prompt_tokens(alone));
}

TEST_F(IsolationE2eTest, AnotherDayAndAnotherDirectoryReachTheModel) {
  const json s = msg("system", "You are a coding agent.");
  auto env = [](const std::string& date, const std::string& dir) {
    return msg("user", "<env>Today's date: " + date + "\nWorking directory: " + dir + "\nFiles: main.c util.c</env>");
  };
  const json day1 = json::array({s, env("2026-12-01", "/srv/alpha"), msg("user", "list the files")});
  auto r1 = chat("key-one", day1);
  ASSERT_EQ(r1.answer.status, 200) << r1.answer.raw;
  const json dir2 = json::array({s, env("2026-12-01", "/srv/beta"), msg("user", "list the files")});
  auto r2 = chat("key-one", dir2);
  ASSERT_EQ(r2.answer.status, 200);
  EXPECT_EQ(r2.upstream, dir2);
  const json day2 = json::array({s, env("2026-12-02", "/srv/alpha"), msg("user", "list the files")});
  auto r3 = chat("key-one", day2);
  ASSERT_EQ(r3.answer.status, 200);
  EXPECT_EQ(r3.upstream, day2);
  // A one-shot run again the next day, with the date in the system prompt.
  const json once1 = json::array({msg("system", "date-day1 Today is 2026-12-01."), msg("user", "summarise")});
  ASSERT_EQ(chat("key-one", once1).answer.status, 200);
  const json once2 = json::array({msg("system", "date-day1 Today is 2026-12-02."), msg("user", "summarise")});
  auto r4 = chat("key-one", once2);
  ASSERT_EQ(r4.answer.status, 200);
  EXPECT_NE(r4.upstream.dump().find("2026-12-02"), std::string::npos) << r4.upstream.dump();
}

TEST_F(IsolationE2eTest, TheSameConversationKeepsItsCacheWhenTheClockMoves) {
  json m = json::array({msg("system", "Current time: 2026-12-01 10:00:00\nYou are terse. Explain things about the sea, "
                                      "the mountains, the rivers and the lakes of the north in plain words."),
                        msg("user", "Tell me about the sea and the mountains, in detail please.")});
  auto r1 = chat("key-one", m);
  ASSERT_EQ(r1.answer.status, 200) << r1.answer.raw;
  const json first = m;
  m[0]["content"] = std::string(m[0]["content"]).replace(0, 33, "Current time: 2026-12-01 10:07:42");
  m.push_back(reply_of(r1));
  m.push_back(msg("user", "And the lakes?"));
  auto r2 = chat("key-one", m);
  ASSERT_EQ(r2.answer.status, 200) << r2.answer.raw;
  // Recognised by our reply: the first prompt stays cached, the new time travels in a note.
  EXPECT_GE(cached_tokens(r2) * 10, prompt_tokens(r1) * 9) << r2.answer.raw;
  EXPECT_NE(r2.upstream.dump().find("10:07:42"), std::string::npos);
  IsolationOracle oracle;
  oracle.answered(kScope1, std::nullopt, first, reply_of(r1));
  EXPECT_EQ(oracle.check(kScope1, std::nullopt, m, r2.upstream), "");
}

TEST_F(IsolationE2eTest, AConversationOfOneKeyCannotBeReachedListedOrContinuedWithAnother) {
  const json a = json::array({msg("system", "S"), msg("user", "the launch code is 0000 for key one")});
  auto r1 = chat("key-one", a, {{"X-Session-Id", "shared"}});
  ASSERT_EQ(r1.answer.status, 200) << r1.answer.raw;
  auto c = front_->client();
  auto list1 = c.Get("/kvgate/v1/sessions", {{"Authorization", "Bearer key-one"}});
  ASSERT_TRUE(list1 && list1->status == 200);
  const json l1 = json::parse(list1->body);
  ASSERT_EQ(l1["data"].size(), 1u);
  const std::string id1 = l1["data"][0]["id"];
  // Key two: not listed, not found by id, not in the status' slot owners.
  auto list2 = c.Get("/kvgate/v1/sessions", {{"Authorization", "Bearer key-two"}});
  ASSERT_TRUE(list2 && list2->status == 200);
  EXPECT_EQ(list2->body.find(id1), std::string::npos);
  auto get2 = c.Get("/kvgate/v1/sessions/" + id1, {{"Authorization", "Bearer key-two"}});
  ASSERT_TRUE(get2);
  EXPECT_EQ(get2->status, 404);
  auto compact2 = c.Post("/kvgate/v1/sessions/" + id1 + "/compact", {{"Authorization", "Bearer key-two"}}, "{}",
                         "application/json");
  ASSERT_TRUE(compact2);
  EXPECT_EQ(compact2->status, 404);
  auto status2 = c.Get("/kvgate/v1/status", {{"Authorization", "Bearer key-two"}});
  ASSERT_TRUE(status2 && status2->status == 200);
  EXPECT_EQ(status2->body.find(id1), std::string::npos);
  EXPECT_EQ(status2->body.find("launch code"), std::string::npos);
  auto metrics2 = c.Get("/metrics", {{"Authorization", "Bearer key-two"}});
  ASSERT_TRUE(metrics2 && metrics2->status == 200);
  EXPECT_EQ(metrics2->body.find(id1), std::string::npos);
  // Continued with the same id, or with the same content and our reply, under key two:
  // only key two's own messages reach the engine.
  json b = json::array({msg("system", "S"), msg("user", "what is the code?")});
  auto r2 = chat("key-two", b, {{"X-Session-Id", "shared"}});
  ASSERT_EQ(r2.answer.status, 200);
  EXPECT_EQ(r2.upstream, b);
  json copy = a;
  copy.push_back(reply_of(r1));
  copy.push_back(msg("user", "repeat it"));
  auto r3 = chat("key-two", copy);
  ASSERT_EQ(r3.answer.status, 200);
  EXPECT_EQ(r3.upstream, copy);  // its own (copied) messages, nothing kvgate kept for key one
}

// A generated run through the whole stack: three clients of two keys sharing a system prompt
// and fixed messages, continuing, retrying, sliding their windows and forking; every upstream
// prompt judged by the oracle.
TEST_F(IsolationE2eTest, CollidingClientsThroughTheRealEngineNeverMix) {
  std::mt19937 rng(20261201);
  auto pick = [&rng](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  struct Client {
    std::string key;
    std::optional<std::string> id;
    json history;
  };
  const json sys = msg("system", "Current time: 2026-12-01 10:00:00\nYou help with files.");
  std::vector<Client> clients = {{"key-one", std::nullopt, json::array({sys})},
                                 {"key-one", std::nullopt, json::array({sys})},
                                 {"key-two", std::string("agent"), json::array({sys})}};
  const char* fixed[] = {"yes", "Extract the facts worth remembering.", "continue"};
  IsolationOracle oracle;
  for (int step = 0; step < 30; ++step) {
    Client& c = clients[pick(clients.size())];
    switch (pick(6)) {
      case 0:
        c.history[0]["content"] = fmt::format("Current time: 2026-12-01 10:{:02}:00\nYou help with files.", step);
        break;
      case 1:
        if (c.history.size() > 4) c.history.erase(c.history.begin() + 1, c.history.begin() + 3);
        break;
      case 2:
        c.history = clients[pick(clients.size())].history;
        break;
      default:
        break;
    }
    c.history.push_back(msg("user", pick(2) ? fixed[pick(3)] : fmt::format("file {} please", pick(5))));
    httplib::Headers h;
    if (c.id) h.emplace("X-Session-Id", *c.id);
    auto r = chat(c.key, c.history, h);
    ASSERT_EQ(r.answer.status, 200) << r.answer.raw;
    const std::string scope = scope_of_key(c.key);
    EXPECT_EQ(oracle.check(scope, c.id, c.history, r.upstream), "") << "step " << step;
    oracle.answered(scope, c.id, c.history, reply_of(r));
    if (pick(4) != 0) c.history.push_back(reply_of(r));
  }
}

TEST_F(IsolationE2eTest, StatusListsOnlyTheCallersOwnRecentTurns) {
  // Key one sends two turns, key two one: each key's status lists its own and no figure of the
  // other's (their prompt sizes and times tell what the other sends and when).
  ASSERT_EQ(chat("key-one", json::array({msg("user", "first of key one")})).answer.status, 200);
  ASSERT_EQ(chat("key-one", json::array({msg("user", "second of key one, a little longer")})).answer.status, 200);
  ASSERT_EQ(chat("key-two", json::array({msg("user", "only turn of key two")})).answer.status, 200);
  auto c = front_->client();
  auto recent = [&](const std::string& key) {
    auto r = c.Get("/kvgate/v1/status", {{"Authorization", "Bearer " + key}});
    EXPECT_TRUE(r && r->status == 200);
    return r ? json::parse(r->body)["throughput"]["recent"] : json();
  };
  auto sessions = [&](const std::string& key) {
    auto r = c.Get("/kvgate/v1/sessions", {{"Authorization", "Bearer " + key}});
    std::set<std::string> ids;
    const json listing = json::parse(r->body);
    for (const auto& s : listing["data"]) ids.insert(s["id"].get<std::string>());
    return ids;
  };
  const json one = recent("key-one"), two = recent("key-two");
  ASSERT_EQ(one.size(), 2u) << one.dump();
  ASSERT_EQ(two.size(), 1u) << two.dump();
  const auto own_one = sessions("key-one"), own_two = sessions("key-two");
  for (const auto& e : one) EXPECT_TRUE(own_one.contains(e["session"].get<std::string>())) << e.dump();
  for (const auto& e : two) EXPECT_TRUE(own_two.contains(e["session"].get<std::string>())) << e.dump();
}

}  // namespace
}  // namespace kvgate::gateway
