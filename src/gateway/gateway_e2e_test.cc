// End to end through kvgate's gateway to the real pinned llama-server.
#include "testing/gateway_e2e.h"

#include <atomic>
#include <thread>

#include <gtest/gtest.h>

#include "bench/tool_model.h"
#include "http/sse.h"
#include "testing/eventually.h"
#include "testing/fork_param.h"

namespace kvgate::gateway {

using http::HttpServerOptions;
using http::SseParser;

namespace {

using nlohmann::json;
using testing::Engine;
using testing::Front;
using testing::plain_chat;
using testing::post_json;

class GatewayE2eTest : public testing::EngineSuite<GatewayE2eTest> {
 public:
  static testing::EngineOptions engine_options() { return {.context = 8192, .slots = 2}; }

 protected:
  std::unique_ptr<Front> front(GatewayOptions o = {}, HttpServerOptions http = {}) {
    o.slots = 2;
    return std::make_unique<Front>([] { return engine_->endpoint(); }, with_fork(o), http);
  }
};
KVGATE_BOTH_ENGINES(GatewayE2eTest);

json convo(const std::string& first) {
  return json::array({{{"role", "system"}, {"content", "You are terse. Current time: 2026-11-29 10:00:00"}},
                      {{"role", "user"}, {"content", first}}});
}

TEST_P(GatewayE2eTest, NonStreamAnswerAndSecondTurnServedFromCache) {
  auto f = front();
  auto c = f->client();
  json messages = convo("Tell me about the sea and the mountains and the rivers of the north, in detail please.");
  auto a1 = post_json(c, "/v1/chat/completions", plain_chat(messages));
  ASSERT_EQ(a1.status, 200) << a1.raw;
  ASSERT_TRUE(a1.body["choices"][0]["message"]["content"].is_string());
  const uint64_t p1 = a1.body["usage"]["prompt_tokens"];

  // Turn 2: the client sends the history back, with its clock line updated.
  messages[0]["content"] = "You are terse. Current time: 2026-11-29 10:01:13";
  messages.push_back(a1.body["choices"][0]["message"]);
  messages.push_back({{"role", "user"}, {"content", "And the lakes?"}});
  auto a2 = post_json(c, "/v1/chat/completions", plain_chat(messages));
  ASSERT_EQ(a2.status, 200) << a2.raw;
  const uint64_t cached = a2.body["usage"]["prompt_tokens_details"]["cached_tokens"];
  // The clock line changed, so the system prompt differs after "Current time: ..."; what
  // comes before it is still reused (and the session is recognised).
  EXPECT_GT(cached, 0U);
  auto sessions = c.Get("/kvgate/v1/sessions");
  ASSERT_TRUE(sessions);
  auto list = json::parse(sessions->body)["data"];
  bool found = false;
  for (const auto& s : list) {
    if (s["requests"] == 2 && s["recognised_by"] == "prefix") found = true;
  }
  EXPECT_TRUE(found) << list.dump(2);
  EXPECT_GT(p1, 10U);
}

TEST_P(GatewayE2eTest, IdenticalPrefixIsServedFromCache) {
  auto f = front();
  auto c = f->client();
  json messages = convo("Describe the history of bridges, roads and canals in great detail.");
  auto a1 = post_json(c, "/v1/chat/completions", plain_chat(messages));
  ASSERT_EQ(a1.status, 200) << a1.raw;
  messages.push_back(a1.body["choices"][0]["message"]);
  messages.push_back({{"role", "user"}, {"content", "Go on."}});
  auto a2 = post_json(c, "/v1/chat/completions", plain_chat(messages));
  ASSERT_EQ(a2.status, 200) << a2.raw;
  const uint64_t prompt2 = a2.body["usage"]["prompt_tokens"];
  const uint64_t cached2 = a2.body["usage"]["prompt_tokens_details"]["cached_tokens"];
  const uint64_t prompt1 = a1.body["usage"]["prompt_tokens"];
  std::printf("first prompt %llu tokens, reply %llu; second prompt %llu, %llu from the cache\n",
              static_cast<unsigned long long>(prompt1),
              static_cast<unsigned long long>(a1.body["usage"].value("completion_tokens", 0)),
              static_cast<unsigned long long>(prompt2), static_cast<unsigned long long>(cached2));
  // Turn 1's prompt ended with the generation prompt, which with thinking off includes an
  // empty "<think>\n\n</think>\n\n" block that a Qwen3-style template leaves out of a reply
  // before the last user message; the engine's template made prefix-stable (preserve_thinking,
  // as kvgate up starts it) keeps it, so all of turn 1's prompt is reused (54 of its 60 tokens
  // with the model's own template).
  EXPECT_GE(cached2, prompt1) << "turn 2 should reuse all of turn 1's prompt";
  EXPECT_LT(prompt2 - cached2, prompt2 / 2);
}

TEST_P(GatewayE2eTest, ASelfSummarisingClientGoesOnInItsSession) {
  // Claude Code's and Codex's auto-compaction: ask for a summary, then replace the history
  // with it. The continuation is the same conversation (one session, its slot), sent only
  // what it carries.
  auto f = front();
  auto c = f->client();
  std::string system = "You are a careful coding agent. ";
  for (int i = 0; i < 40; ++i) system += "Rule " + std::to_string(i) + ": read before you write. ";
  json messages = json::array({{{"role", "system"}, {"content", system}},
                               {{"role", "user"}, {"content", "Fix the failing build of the tests, please."}}});
  auto a1 = post_json(c, "/v1/chat/completions", plain_chat(messages, 16));
  ASSERT_EQ(a1.status, 200) << a1.raw;
  messages.push_back(a1.body["choices"][0]["message"]);
  messages.push_back({{"role", "user"}, {"content", "Your task is to create a detailed summary of the conversation."}});
  auto a2 = post_json(c, "/v1/chat/completions", plain_chat(messages, 48));
  ASSERT_EQ(a2.status, 200) << a2.raw;
  const std::string summary = a2.body["choices"][0]["message"]["content"];
  ASSERT_GE(summary.size(), 64u) << "the summary is too short to be carried: " << a2.raw;
  const json next = json::array(
      {{{"role", "system"}, {"content", system}},
       {{"role", "user"},
        {"content", "This session is being continued from a previous conversation that ran out of context. "
                    "The conversation is summarized below:\nSummary:\n" + summary + "\nPlease continue."}}});
  auto a3 = post_json(c, "/v1/chat/completions", plain_chat(next, 8));
  ASSERT_EQ(a3.status, 200) << a3.raw;
  auto sessions = json::parse(c.Get("/kvgate/v1/sessions")->body)["data"];
  ASSERT_EQ(sessions.size(), 1u) << sessions.dump(2);
  EXPECT_EQ(sessions[0]["recognised_by"], "continuation") << sessions.dump(2);
  EXPECT_EQ(sessions[0]["requests"], 3) << sessions.dump(2);
  // Its slot still holds the system prompt.
  const uint64_t cached = a3.body["usage"]["prompt_tokens_details"]["cached_tokens"];
  EXPECT_GT(cached, 200u) << a3.raw;
}

TEST_P(GatewayE2eTest, ATurnAfterAToolCallExtendsThePreviousPrompt) {
  // With thinking off the generation prompt ends in an empty think block, which a
  // Qwen3-style template renders for a past reply only when it carries reasoning: kvgate
  // marks the reply with an empty one, so the turn after a tool call reuses the whole
  // previous prompt, instead of recomputing from the block on.
  GatewayOptions o;
  o.slots = 2;
  testing::Front f(std::make_shared<bench::ToolModelUpstream>(
                       std::make_shared<HttpUpstream>([] { return engine_->endpoint(); })),
                   with_fork(o));
  auto c = f.client();
  const json tools = json::array({{{"type", "function"},
                                   {"function",
                                    {{"name", "read_file"},
                                     {"description", "Read a file"},
                                     {"parameters",
                                      {{"type", "object"},
                                       {"properties", {{"path", {{"type", "string"}}}}},
                                       {"required", json::array({"path"})}}}}}}});
  json messages = json::array({{{"role", "system"}, {"content", "You are an agent with tools. Use them."}},
                               {{"role", "user"}, {"content", "Read the file notes.md, please."}}});
  json first = plain_chat(messages, 48);
  first["tools"] = tools;
  first["tool_choice"] = "required";
  auto a1 = post_json(c, "/v1/chat/completions", first);
  ASSERT_EQ(a1.status, 200) << a1.raw;
  const json& call_message = a1.body["choices"][0]["message"];
  ASSERT_TRUE(call_message.contains("tool_calls") && !call_message["tool_calls"].empty()) << a1.raw;
  messages.push_back(call_message);
  messages.push_back({{"role", "tool"},
                      {"tool_call_id", call_message["tool_calls"][0]["id"]},
                      {"content", "notes: ship it"}});
  json second = plain_chat(messages, 8);
  second["tools"] = tools;
  auto a2 = post_json(c, "/v1/chat/completions", second);
  ASSERT_EQ(a2.status, 200) << a2.raw;
  const uint64_t prompt1 = a1.body["usage"]["prompt_tokens"];
  const uint64_t cached2 = a2.body["usage"]["prompt_tokens_details"]["cached_tokens"];
  std::printf("first prompt %llu tokens, reply %llu; second prompt %llu, %llu from the cache\n",
              static_cast<unsigned long long>(prompt1),
              static_cast<unsigned long long>(a1.body["usage"].value("completion_tokens", 0)),
              static_cast<unsigned long long>(a2.body["usage"].value("prompt_tokens", 0)),
              static_cast<unsigned long long>(cached2));
  // All of the first prompt, its empty think block included (without the mark the history
  // leaves the block out and the reuse stops before it). How much of the call after it is
  // reused depends on how the engine tokenised the generated call.
  EXPECT_GE(cached2, prompt1) << a2.raw;
}

TEST_P(GatewayE2eTest, StreamRelaysEventsAndUsageOnlyWhenAsked) {
  auto f = front();
  auto c = f->client();
  for (bool include_usage : {false, true}) {
    json body = plain_chat(convo("Stream a few words."), 12);
    body["stream"] = true;
    if (include_usage) body["stream_options"] = {{"include_usage", true}};
    std::string raw;
    auto res = c.Post("/v1/chat/completions", body.dump(), "application/json");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    EXPECT_EQ(res->get_header_value("Content-Type"), "text/event-stream");
    EXPECT_EQ(res->get_header_value("X-Accel-Buffering"), "no");
    SseParser p;
    auto events = p.feed(res->body);
    ASSERT_GE(events.size(), 3U) << res->body;
    EXPECT_TRUE(events.back().is_done());
    bool usage_chunk = false;
    std::string text;
    for (const auto& ev : events) {
      if (ev.comment_only || ev.is_done()) continue;
      auto j = json::parse(ev.data);
      EXPECT_FALSE(j.contains("prompt_progress")) << "progress must not reach the client as data";
      if (j.contains("usage") && j["choices"].empty()) usage_chunk = true;
      for (const auto& ch : j["choices"]) {
        if (ch["delta"].contains("content") && ch["delta"]["content"].is_string()) text += ch["delta"]["content"];
      }
    }
    EXPECT_EQ(usage_chunk, include_usage);
    EXPECT_FALSE(text.empty());
  }
}

TEST_P(GatewayE2eTest, BadInputGetsOpenAiErrors) {
  HttpServerOptions http;
  http.max_body_bytes = 4096;
  auto f = front({}, http);
  auto c = f->client();
  auto bad_json = c.Post("/v1/chat/completions", "{\"messages\": [", "application/json");
  ASSERT_TRUE(bad_json);
  EXPECT_EQ(bad_json->status, 400);
  auto j = json::parse(bad_json->body);
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["code"], "invalid_json");

  auto missing = post_json(c, "/v1/chat/completions", {{"model", "x"}});
  EXPECT_EQ(missing.status, 400);
  EXPECT_EQ(missing.body["error"]["param"], "messages");

  // (A content of the wrong type in the history is repaired, not refused — see
  // history_repair.h; these are types nothing can repair.)
  auto wrong = post_json(c, "/v1/chat/completions", {{"messages", json::array({{{"role", 7}, {"content", "x"}}})}});
  EXPECT_EQ(wrong.status, 400);
  EXPECT_EQ(wrong.body["error"]["param"], "messages[0].role");
  auto wrong_stream = post_json(c, "/v1/chat/completions", {{"messages", convo("x")}, {"stream", "yes"}});
  EXPECT_EQ(wrong_stream.status, 400);
  EXPECT_EQ(wrong_stream.body["error"]["param"], "stream");

  auto big = post_json(c, "/v1/chat/completions", plain_chat(convo(std::string(10000, 'x'))));
  EXPECT_EQ(big.status, 413);
  EXPECT_TRUE(big.body.contains("error"));

  auto nope = c.Get("/v1/nothing");
  ASSERT_TRUE(nope);
  EXPECT_EQ(nope->status, 404);
  EXPECT_EQ(json::parse(nope->body)["error"]["type"], "not_found_error");

  auto method = c.Get("/v1/chat/completions");
  ASSERT_TRUE(method);
  EXPECT_EQ(method->status, 405);

  // The engine's own validation errors come back in the same format, with its message.
  json bad_param = plain_chat(convo("x"));
  bad_param["chat_template_kwargs"] = {{"enable_thinking", "yes"}};
  bad_param["kvgate"] = {{"thinking", true}};  // so the policy does not overwrite the value
  bad_param.erase("kvgate");
  auto engine_err = post_json(c, "/v1/chat/completions", {{"messages", convo("x")}, {"max_tokens", "lots"}});
  EXPECT_EQ(engine_err.status, 400);
}

TEST_P(GatewayE2eTest, ApiKeyIsEnforced) {
  auto f = front({.api_keys = {"sekrit"}});
  auto c = f->client();
  auto no_key = post_json(c, "/v1/chat/completions", plain_chat(convo("hi")));
  EXPECT_EQ(no_key.status, 401);
  EXPECT_EQ(no_key.body["error"]["type"], "authentication_error");
  auto wrong = post_json(c, "/v1/chat/completions", plain_chat(convo("hi")), {{"Authorization", "Bearer sekriT"}});
  EXPECT_EQ(wrong.status, 401);
  auto right = post_json(c, "/v1/chat/completions", plain_chat(convo("hi")), {{"Authorization", "Bearer sekrit"}});
  EXPECT_EQ(right.status, 200) << right.raw;
  auto metrics = c.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 401);
  auto health = c.Get("/health");  // public
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

TEST_P(GatewayE2eTest, ClientDisconnectCancelsUpstream) {
  auto f = front();
  // A long generation, streamed; the client reads the first bytes and leaves.
  json body = {{"messages", convo("Write a very long story.")}, {"max_tokens", 4000}, {"stream", true},
               {"ignore_eos", true}, {"logit_bias", engine_->word_bias()}};
  std::atomic<int> chunks{0};
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/chat/completions";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++chunks < 5; };
  httplib::Client c2 = f->client();
  c2.send(req);  // returns once we stop reading (connection closed by us)
  EXPECT_GE(chunks.load(), 5);
  // The engine must stop generating soon after: its slots go idle.
  httplib::Client engine("127.0.0.1", engine_->endpoint().port);
  engine.set_bearer_token_auth(engine_->api_key().c_str());
  // (Without the cancellation it would go on for its max_tokens, far past the deadline.)
  const bool idle = testing::eventually([&] {
    auto slots = engine.Get("/slots");
    if (!slots || slots->status != 200) return false;
    bool all_idle = true;
    // mainline: "is_processing": bool; ik: "state": 0 idle, 1 processing
    for (const auto& s : json::parse(slots->body)) {
      all_idle = all_idle && (s.contains("is_processing") ? !s["is_processing"].get<bool>() : s.value("state", 1) == 0);
    }
    return all_idle;
  });
  EXPECT_TRUE(idle) << "the engine kept generating for a client that left";
}

TEST_P(GatewayE2eTest, MetricsAndStatus) {
  auto f = front();
  auto c = f->client();
  ASSERT_EQ(post_json(c, "/v1/chat/completions", plain_chat(convo("count me"))).status, 200);
  auto m = c.Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->status, 200);
  EXPECT_NE(m->body.find("kvgate_requests_total{route=\"chat\",status=\"200\",stream=\"false\"} 1"), std::string::npos)
      << m->body;
  EXPECT_NE(m->body.find("kvgate_prompt_tokens_total"), std::string::npos);
  EXPECT_NE(m->body.find("kvgate_ttft_seconds_bucket"), std::string::npos);
  auto s = c.Get("/kvgate/v1/status");
  ASSERT_TRUE(s);
  auto j = json::parse(s->body);
  EXPECT_EQ(j["slots"].size(), 2U);
  EXPECT_GE(j["token_accounting"]["counts"].get<int>(), 1);
  // Exact accounting: the counter agreed with the engine (no mismatches after calibration).
  EXPECT_EQ(j["token_accounting"]["mismatches"], 0);
}

TEST_P(GatewayE2eTest, PassThroughEndpoints) {
  auto f = front();
  auto c = f->client();
  auto tok = post_json(c, "/tokenize", {{"content", "hello world"}});
  EXPECT_EQ(tok.status, 200);
  EXPECT_TRUE(tok.body["tokens"].is_array());
  auto models = c.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 200);
  auto props = c.Get("/props");
  ASSERT_TRUE(props);
  EXPECT_EQ(props->status, 200);
}

// A slot serves every conversation: its listing through kvgate carries none of their text
// (ik's /slots includes the last prompt of each slot; both forks the last sampling strings).
TEST_P(GatewayE2eTest, SlotListingCarriesNoConversationText) {
  auto f = front();
  auto c = f->client();
  const std::string secret = "the vault code is 7-3-9-1 zebra";
  json body = plain_chat(convo(secret));
  body["stop"] = json::array({"zebra stop word"});
  ASSERT_EQ(post_json(c, "/v1/chat/completions", body).status, 200);
  // Straight from the engine the text is there on ik (the precondition that makes this test mean something).
  httplib::Client engine("127.0.0.1", engine_->endpoint().port);
  engine.set_bearer_token_auth(engine_->api_key().c_str());
  auto direct = engine.Get("/slots");
  ASSERT_TRUE(direct);
  if (GetParam() == plan::Fork::kIk) {
    EXPECT_NE(direct->body.find("vault code"), std::string::npos);
  }
  auto through = c.Get("/slots");
  ASSERT_TRUE(through);
  ASSERT_EQ(through->status, 200);
  EXPECT_EQ(through->body.find("vault code"), std::string::npos) << through->body.substr(0, 400);
  EXPECT_EQ(through->body.find("zebra"), std::string::npos) << through->body.substr(0, 400);
  auto slots = json::parse(through->body);
  ASSERT_TRUE(slots.is_array());
  EXPECT_EQ(slots.size(), 2U);
  for (const auto& s : slots) {
    EXPECT_TRUE(s.contains("id")) << s.dump();
    EXPECT_TRUE(s.contains("n_ctx")) << s.dump();
  }
}

}  // namespace
}  // namespace kvgate::gateway
