#include "fleet/affinity.h"

#include <condition_variable>
#include <mutex>

#include <gtest/gtest.h>

#include "fleet/fleet_writers.h"
#include "gateway/chat_completions.h"
#include "gateway/messages_api.h"

namespace kvgate::gateway {
namespace {

using nlohmann::json;

http::HttpRequest post(const std::string& path, const json& body, const std::string& key = "") {
  http::HttpRequest r;
  r.method = "POST";
  r.path = path;
  r.body = body.dump();
  if (!key.empty()) r.headers.emplace_back("authorization", "Bearer " + key);
  return r;
}

json chat(std::initializer_list<std::pair<const char*, std::string>> msgs) {
  json m = json::array();
  for (const auto& [role, content] : msgs) m.push_back({{"role", role}, {"content", content}});
  return {{"messages", m}};
}

const std::string kSystem = "You are a helpful agent with many tools and a long prompt.";
std::string said(int i) { return "message number " + std::to_string(i) + " says something long enough"; }

TEST(AffinityClues, SystemPromptsAndShortMessagesAreNotFingerprinted) {
  const json body = chat({{"system", kSystem}, {"user", said(1)}, {"assistant", "ok"}, {"user", said(2)}});
  const auto c = clues_of(post("/v1/chat/completions", body), body);
  EXPECT_EQ(c.fingerprints.size(), 2u);
  EXPECT_FALSE(c.name);
  const json only_system = chat({{"system", kSystem}, {"user", "hi"}});
  EXPECT_TRUE(clues_of(post("/v1/chat/completions", only_system), only_system).fingerprints.empty());
}

TEST(AffinityClues, TheSameMessagesUnderAnotherKeyAreOtherFingerprints) {
  const json body = chat({{"user", said(1)}});
  const auto a = clues_of(post("/v1/chat/completions", body, "key-a"), body);
  const auto b = clues_of(post("/v1/chat/completions", body, "key-b"), body);
  ASSERT_EQ(a.fingerprints.size(), 1u);
  ASSERT_EQ(b.fingerprints.size(), 1u);
  EXPECT_NE(a.fingerprints[0], b.fingerprints[0]);
}

TEST(AffinityClues, NamesAndPreviousResponsesAreClues) {
  json body = chat({{"user", said(1)}});
  body["prompt_cache_key"] = "conv-7";
  auto c = clues_of(post("/v1/chat/completions", body), body);
  ASSERT_TRUE(c.name);
  auto r = post("/v1/chat/completions", chat({{"user", said(1)}}));
  r.headers.emplace_back("x-session-id", "conv-7");
  EXPECT_NE(*clues_of(r, chat({{"user", said(1)}})).name,
            *c.name);  // header and cache key are different names
  const json resp = {{"input", said(3)}, {"previous_response_id", "resp_1"}};
  c = clues_of(post("/v1/responses", resp), resp);
  ASSERT_TRUE(c.previous_response);
  EXPECT_TRUE(c.previous_response->ends_with("\x1fresp_1")) << *c.previous_response;
  // Under another key the same id is another clue: it never leads to that key's conversation.
  EXPECT_NE(*clues_of(post("/v1/responses", resp, "key-b"), resp).previous_response, *c.previous_response);
  EXPECT_EQ(c.fingerprints.size(), 1u);
  const json anthropic = {{"system", kSystem},
                          {"messages", json::array({{{"role", "user"}, {"content", said(4)}}})}};
  EXPECT_EQ(clues_of(post("/v1/messages", anthropic), anthropic).fingerprints.size(), 1u);
}

TEST(AffinityClues, ACompletionPromptIsFingerprintedByItsPrefixBlocks) {
  const std::string prompt(3000, 'x');
  const json a = {{"prompt", prompt}};
  const json b = {{"prompt", prompt + std::string(1200, 'y')}};
  const auto ca = clues_of(post("/v1/completions", a), a);
  const auto cb = clues_of(post("/v1/completions", b), b);
  ASSERT_EQ(ca.fingerprints.size(), 2u);
  ASSERT_EQ(cb.fingerprints.size(), 4u);
  EXPECT_EQ(ca.fingerprints[1], cb.fingerprints[1]);
}

std::vector<uint64_t> fps(std::initializer_list<uint64_t> v) { return v; }

TEST(AffinityIndexTest, AnAppendingOrSlidingClientIsFoundByMostOfItsMessages) {
  AffinityIndex index;
  index.record("a", fps({1, 2, 3, 4}));
  index.record("b", fps({10, 11}));
  EXPECT_EQ(index.find(fps({1, 2, 3, 4, 5})), "a");  // appended
  EXPECT_EQ(index.find(fps({3, 4, 5, 6})), "a");     // the window slid
  EXPECT_EQ(index.find(fps({10, 4, 11})), "b");      // most votes
  EXPECT_EQ(index.find(fps({4, 10})), "a");          // a tie: the oldest message's
  EXPECT_FALSE(index.find(fps({7, 8})));
  EXPECT_FALSE(index.find({}));
}

TEST(AffinityIndexTest, AFingerprintBelongsToItsNewestConversation) {
  AffinityIndex index;
  index.record("a", fps({1, 2}));
  index.record("b", fps({2, 3}));
  EXPECT_EQ(index.find(fps({2})), "b");
  EXPECT_EQ(index.find(fps({1})), "a");
}

TEST(AffinityIndexTest, TheLeastRecentlyUsedConversationIsForgotten) {
  AffinityIndex index(2, 3);
  EXPECT_TRUE(index.record("a", fps({1})).empty());
  EXPECT_TRUE(index.record("b", fps({2})).empty());
  EXPECT_TRUE(index.record("a", fps({4})).empty());  // a is used again
  EXPECT_EQ(index.record("c", fps({3})), std::vector<std::string>{"b"});
  EXPECT_FALSE(index.find(fps({2})));
  EXPECT_EQ(index.conversations(), 2u);
  index.record("a", fps({5, 6, 7}));  // its oldest fingerprints beyond 3 are dropped
  EXPECT_FALSE(index.find(fps({1})));
  EXPECT_EQ(index.find(fps({5})), "a");
}

TEST(FleetWriters, AnEngineFailureIsHeldOnlyWhileAnotherEngineMayServe) {
  http::ResponseWriter nowhere(-1, false);
  CapturedAnswer client(nowhere);
  FailoverWriter held(client, true);
  EXPECT_TRUE(held.send(503, {{"Retry-After", "2"}}, "{}"));
  EXPECT_TRUE(held.held());
  EXPECT_TRUE(held.answered());
  EXPECT_EQ(held.status(), 503);
  EXPECT_FALSE(client.answered());
  held.take_held().send_to(client);
  EXPECT_EQ(client.status(), 503);

  CapturedAnswer last_client(nowhere);
  FailoverWriter last(last_client, false);
  last.send(502, {}, "{}");
  EXPECT_FALSE(last.held());
  EXPECT_EQ(last_client.status(), 502);

  CapturedAnswer ok_client(nowhere);
  FailoverWriter ok(ok_client, true);
  ok.send(200, {}, "fine");
  EXPECT_FALSE(ok.held());
  EXPECT_EQ(ok_client.held().body, "fine");
}

// The client's side of a stream: what it was given, safe to read while a relay's keep-alive
// thread writes.
class Recorder final : public http::ResponseWriter {
 public:
  Recorder() : http::ResponseWriter(-1, false) {}
  bool send(int status, const http::HeaderList&, std::string_view body) override {
    return take(status, body);
  }
  bool begin_stream(int status, const http::HeaderList&) override { return take(status, ""); }
  bool write(std::string_view data) override { return take(0, data); }
  bool end() override { return true; }
  bool client_gone() override { return false; }
  bool answered() const override {
    std::lock_guard lock(mu_);
    return status_ != 0;
  }
  int status() const override {
    std::lock_guard lock(mu_);
    return status_;
  }
  bool wait_for(std::string_view what) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10),
                        [&] { return text_.find(what) != std::string::npos; });
  }
  std::string text() const {
    std::lock_guard lock(mu_);
    return text_;
  }

 private:
  bool take(int status, std::string_view data) {
    std::lock_guard lock(mu_);
    if (status != 0) status_ = status;
    text_.append(data);
    cv_.notify_all();
    return true;
  }
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int status_ = 0;
  std::string text_;
};

size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

// A keep-alive (a ping, for Messages) may begin the stream before its opening events: the
// member that hands the request on writes them first, since the one that continues writes
// none. One message_start, before the next engine's content; no error.
TEST(FleetWriters, AMessagesStreamHandedOnAfterAKeepAliveOpensOnce) {
  Recorder client;
  {
    FailoverWriter first(client, true);
    MessagesAdapter out(
        first, {.head_grace = std::chrono::milliseconds(0), .keepalive = std::chrono::milliseconds(1)}, "m");
    CancelScope cancel;
    out.open_stream(cancel);
    ASSERT_TRUE(client.wait_for("event: ping")) << client.text();
    out.fail(unavailable("the engine went away", 1));
    EXPECT_TRUE(first.held());
  }
  ASSERT_EQ(client.text().rfind("event: ping", 0), 0u) << client.text();
  {
    FailoverWriter second(client, false);
    MessagesAdapter out(second, {}, "m");
    CancelScope cancel;
    out.open_stream(cancel);
    ASSERT_TRUE(out.begin_stream());
    out.engine_chunk({{"id", "c"}, {"choices", {{{"index", 0}, {"delta", {{"content", "hello"}}}}}}}, "");
    out.engine_chunk(
        {{"id", "c"}, {"choices", {{{"index", 0}, {"delta", json::object()}, {"finish_reason", "stop"}}}}},
        "");
    out.end_stream(true);
  }
  const std::string got = client.text();
  EXPECT_EQ(occurrences(got, "event: message_start"), 1u) << got;
  EXPECT_LT(got.find("event: message_start"), got.find("event: content_block_start")) << got;
  EXPECT_EQ(occurrences(got, "event: message_stop"), 1u) << got;
  EXPECT_EQ(got.find("event: error"), std::string::npos) << got;
}

// What the member keeps for its client: an engine error after part of the answer went out
// (what was sent cannot be taken back), and an error about the request, not the engine. Both
// are written in the client's stream, not handed on; for chat completions and Messages alike.
TEST(FleetWriters, AnErrorAfterTheAnswerBeganOrAboutTheRequestIsTheClients) {
  const json chunk = {{"id", "c"}, {"choices", {{{"index", 0}, {"delta", {{"content", "hello"}}}}}}};
  for (const bool messages : {false, true}) {
    for (const bool began : {true, false}) {
      SCOPED_TRACE(std::string(messages ? "messages" : "chat") +
                   (began ? ", answer begun" : ", request error"));
      Recorder client;
      FailoverWriter first(client, true);
      {
        std::unique_ptr<TurnOutput> out;
        if (messages) {
          out = std::make_unique<MessagesAdapter>(first, RelayOptions{}, "m");
        } else {
          out = std::make_unique<ChatCompletionsAdapter>(first, RelayOptions{});
        }
        CancelScope cancel;
        out->open_stream(cancel);
        ASSERT_TRUE(out->begin_stream());
        if (began) out->engine_chunk(chunk, "data: " + chunk.dump() + "\n\n");
        out->fail(began ? unavailable("the engine went away", 1) : context_length_exceeded("too long"));
      }
      EXPECT_FALSE(first.held());
      const std::string got = client.text();
      EXPECT_NE(
          got.find(messages ? "event: error" : (began ? "engine_unavailable" : "context_length_exceeded")),
          std::string::npos)
          << got;
    }
  }
}

// A stream handed on (only its head and keep-alives went out) is continued by the next
// engine: one head, the keep-alives, the next engine's events, no error.
TEST(FleetWriters, AStreamHandedOnIsContinuedByTheNextEngine) {
  http::ResponseWriter nowhere(-1, false);
  CapturedAnswer client(nowhere);
  const std::string down = "data: {\"error\":{\"code\":\"engine_unavailable\"}}\n\n";
  {
    FailoverWriter first(client, true);
    EXPECT_FALSE(first.continues_stream());
    EXPECT_TRUE(first.begin_stream(200, {}));
    EXPECT_TRUE(first.write(": kvgate: waiting for the engine\n\n"));
    EXPECT_TRUE(first.hand_on(503, down));
    EXPECT_TRUE(first.end());
    ASSERT_TRUE(first.held());
    EXPECT_EQ(first.status(), 503);
  }
  {
    FailoverWriter second(client, false);
    EXPECT_TRUE(second.continues_stream());
    EXPECT_TRUE(second.begin_stream(200, {}));
    EXPECT_TRUE(second.write("data: {\"choices\":[]}\n\n"));
    EXPECT_TRUE(second.write("data: [DONE]\n\n"));
    EXPECT_TRUE(second.end());
    EXPECT_FALSE(second.held());
  }
  EXPECT_EQ(client.status(), 200);
  EXPECT_EQ(client.held().body,
            ": kvgate: waiting for the engine\n\ndata: {\"choices\":[]}\n\ndata: [DONE]\n\n");

  // The last engine cannot hand on: its error is the client's.
  CapturedAnswer last_client(nowhere);
  FailoverWriter last(last_client, false);
  last.begin_stream(200, {});
  EXPECT_FALSE(last.hand_on(503, down));
  EXPECT_FALSE(last.held());

  // Nobody took it: the held error events end the client's stream.
  CapturedAnswer alone(nowhere);
  FailoverWriter only(alone, true);
  only.begin_stream(200, {});
  ASSERT_TRUE(only.hand_on(503, down));
  only.take_held().send_to(alone);
  EXPECT_EQ(alone.held().body, down);

  // A whole answer from the next engine after the stream began ends the stream as an event.
  CapturedAnswer continued(nowhere);
  {
    FailoverWriter first(continued, true);
    first.begin_stream(200, {});
    ASSERT_TRUE(first.hand_on(503, down));
  }
  FailoverWriter next(continued, false);
  next.send(429, {}, R"({"error":{"code":"queue_full"}})");
  EXPECT_EQ(continued.held().body, "data: {\"error\":{\"code\":\"queue_full\"}}\n\n");
}

TEST(FleetWriters, PrometheusTextsAreMergedByFamilyWithAnUpstreamLabel) {
  const std::string a =
      "# HELP kvgate_x Things.\n# TYPE kvgate_x counter\nkvgate_x{kind=\"k\"} 1\n"
      "# TYPE kvgate_y gauge\nkvgate_y 2\n";
  const std::string b = "# HELP kvgate_x Things.\n# TYPE kvgate_x counter\nkvgate_x{kind=\"k\"} 3\n";
  const std::string merged = merge_prometheus({{"http://a:1", a}, {"http://b:2", b}});
  EXPECT_EQ(merged,
            "# HELP kvgate_x Things.\n# TYPE kvgate_x counter\n"
            "kvgate_x{upstream=\"http://a:1\",kind=\"k\"} 1\n"
            "kvgate_x{upstream=\"http://b:2\",kind=\"k\"} 3\n"
            "# TYPE kvgate_y gauge\n"
            "kvgate_y{upstream=\"http://a:1\"} 2\n");
}

}  // namespace
}  // namespace kvgate::gateway
