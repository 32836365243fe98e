// Through kvgate, agents are not wedged by the engine's parser: generations it rejects are
// rescued into normal answers (streamed or not), and histories it rejects are repaired —
// on the real engine, with a random-weight model whose output it rejects often.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "http/sse.h"
#include "rescue/relaxed_json.h"
#include "testing/fork_param.h"
#include "testing/gateway_e2e.h"

namespace kvgate::gateway {

using http::SseParser;
using rescue::parse_strict_json;

namespace {

using nlohmann::json;
using testing::Engine;
using testing::Front;
using testing::post_json;

class RescueGatewayE2eTest : public testing::EngineSuite<RescueGatewayE2eTest> {
 public:
  static testing::EngineOptions engine_options() { return {.context = 8192, .slots = 1}; }

 protected:
  static json tools() {
    return json::array({{{"type", "function"},
                         {"function", {{"name", "read_file"},
                                       {"description", "Read a file"},
                                       {"parameters", {{"type", "object"},
                                                       {"properties", {{"path", {{"type", "string"}}}}},
                                                       {"required", json::array({"path"})}}}}}}});
  }
  static json request(int seed, bool stream) {
    return {{"messages", json::array({{{"role", "system"}, {"content", "You are an agent with tools."}},
                                      {{"role", "user"}, {"content", "Read the file notes.md and tell me what it says."}}})},
            {"tools", tools()},
            {"max_tokens", 24},
            {"seed", seed},
            {"stream", stream}};
  }
  static httplib::Client direct() {
    httplib::Client c("127.0.0.1", engine_->endpoint().port);
    c.set_bearer_token_auth(engine_->api_key().c_str());
    c.set_read_timeout(std::chrono::seconds(120));
    return c;
  }
};
KVGATE_BOTH_ENGINES(RescueGatewayE2eTest);

// A response the OpenAI contract allows: content text or calls whose arguments are objects.
void expect_valid_message(const json& message, const std::string& context) {
  ASSERT_TRUE(message.is_object()) << context;
  EXPECT_EQ(message["role"], "assistant") << context;
  const bool has_calls = message.contains("tool_calls") && message["tool_calls"].is_array() && !message["tool_calls"].empty();
  if (has_calls) {
    for (const auto& call : message["tool_calls"]) {
      EXPECT_EQ(call["function"]["name"], "read_file") << context;
      auto args = parse_strict_json(call["function"]["arguments"].get<std::string>());
      ASSERT_TRUE(args && args->is_object()) << context << ": " << call.dump();
    }
  } else {
    EXPECT_TRUE(message["content"].is_string()) << context << ": " << message.dump();
  }
}

TEST_P(RescueGatewayE2eTest, RejectedOutputsBecomeNormalAnswers) {
  Front front([] { return engine_->endpoint(); }, with_fork());
  auto c = front.client();
  auto d = direct();
  int direct_rejected = 0;
  int through_failed = 0;
  for (int seed = 1; seed <= 12; ++seed) {
    json straight = request(seed, false);
    straight["chat_template_kwargs"] = {{"enable_thinking", false}};
    auto s = post_json(d, "/v1/chat/completions", straight);
    // mainline's parser rejects the output; ik fails to encode output that is not UTF-8.
    if (s.status == 500 && (s.raw.find("does not match the expected") != std::string::npos ||
                            s.raw.find("invalid UTF-8 byte") != std::string::npos)) {
      ++direct_rejected;
    }
    auto a = post_json(c, "/v1/chat/completions", request(seed, false));
    if (a.status != 200) {
      ++through_failed;
      ADD_FAILURE() << "seed " << seed << ": " << a.raw;
      continue;
    }
    expect_valid_message(a.body["choices"][0]["message"], fmt::format("seed {}", seed));
    if (seed > 1) {
      // The same prompt in the one slot every time: the engine reads it from its cache, and a
      // rescued answer reports that as any other does (not 0 and a false slot eviction).
      const uint64_t prompt = a.body["usage"]["prompt_tokens"];
      const uint64_t cached = a.body["usage"]["prompt_tokens_details"]["cached_tokens"];
      EXPECT_GE(cached * 2, prompt) << "seed " << seed << ": " << a.raw;
    }
  }
  std::printf("12 seeds: straight to the engine %d rejected; through kvgate %d failed\n", direct_rejected, through_failed);
  EXPECT_GT(direct_rejected, 0) << "the engine rejected none of the random outputs: the test shows nothing";
  EXPECT_EQ(through_failed, 0);
  auto metrics = c.Get("/metrics")->body;
  EXPECT_NE(metrics.find("kvgate_rescues_total"), std::string::npos);
}

TEST_P(RescueGatewayE2eTest, StreamsStayWellFormed) {
  Front front([] { return engine_->endpoint(); }, with_fork());
  auto c = front.client();
  for (int seed = 1; seed <= 12; ++seed) {
    auto res = c.Post("/v1/chat/completions", request(seed, true).dump(), "application/json");
    ASSERT_TRUE(res) << seed;
    ASSERT_EQ(res->status, 200) << res->body;
    SseParser p;
    auto events = p.feed(res->body);
    ASSERT_FALSE(events.empty());
    EXPECT_TRUE(events.back().is_done()) << "seed " << seed << ": " << res->body.substr(res->body.size() > 600 ? res->body.size() - 600 : 0);
    std::string finish;
    for (const auto& ev : events) {
      if (ev.comment_only || ev.is_done()) continue;
      auto j = json::parse(ev.data);
      EXPECT_FALSE(j.contains("error")) << "seed " << seed << ": " << ev.data;
      for (const auto& ch : j.value("choices", json::array())) {
        if (ch.contains("finish_reason") && ch["finish_reason"].is_string()) finish = ch["finish_reason"];
      }
    }
    EXPECT_FALSE(finish.empty()) << "seed " << seed << ": no finish_reason";
  }
  // On mainline about 4 in 10 of these generations are rejected by the engine's parser (see
  // the test above): the streams above include rescued ones. ik streams the same outputs
  // piece by piece without failing them (its rejection is of a whole non-streamed body).
  if (GetParam() == plan::Fork::kMainline) {
    auto metrics = c.Get("/metrics")->body;
    EXPECT_NE(metrics.find("kvgate_rescues_total"), std::string::npos) << metrics;
  }
}

// A raw completion (POST /v1/completions) cut after two tokens: on mainline some outputs are
// bytes that are not UTF-8 and the engine answers 500 (seeds 12, 19 and 21 of these, among
// others). Through kvgate every one is a 200, the refused ones replayed and marked raw, and a
// stream ends with [DONE] instead of the engine's error event.
TEST_P(RescueGatewayE2eTest, RawCompletionsTheEngineRefusesAreAnswered) {
  Front front([] { return engine_->endpoint(); }, with_fork());
  auto c = front.client();
  auto d = direct();
  int direct_rejected = 0, through_failed = 0, marked_raw = 0, stream_errors = 0;
  for (int seed = 1; seed <= 30; ++seed) {
    const json body = {{"prompt", "Something else entirely."}, {"max_tokens", 2}, {"seed", seed}};
    if (auto s = post_json(d, "/v1/completions", body); s.status == 500) ++direct_rejected;
    auto a = post_json(c, "/v1/completions", body);
    if (a.status != 200) {
      ++through_failed;
      ADD_FAILURE() << "seed " << seed << ": " << a.raw;
      continue;
    }
    EXPECT_TRUE(a.body["choices"][0]["text"].is_string()) << a.raw;
    if (a.body.contains("kvgate") && a.body["kvgate"].value("raw", false)) ++marked_raw;
    json streamed = body;
    streamed["stream"] = true;
    auto res = c.Post("/v1/completions", streamed.dump(), "application/json");
    ASSERT_TRUE(res && res->status == 200) << seed;
    SseParser p;
    auto events = p.feed(res->body);
    ASSERT_FALSE(events.empty());
    EXPECT_TRUE(events.back().is_done()) << "seed " << seed << ": " << res->body;
    for (const auto& ev : events) {
      if (!ev.comment_only && !ev.is_done() && json::parse(ev.data, nullptr, false).contains("error"))
        ++stream_errors;
    }
  }
  std::printf(
      "30 raw completions: straight to the engine %d refused; through kvgate %d failed, %d marked raw, %d "
      "stream error events\n",
      direct_rejected, through_failed, marked_raw, stream_errors);
  if (GetParam() == plan::Fork::kMainline) {
    EXPECT_GT(direct_rejected, 0) << "the engine refused none: the test shows nothing";
  }
  EXPECT_EQ(marked_raw, direct_rejected);
  EXPECT_EQ(through_failed, 0);
  EXPECT_EQ(stream_errors, 0);
}

TEST_P(RescueGatewayE2eTest, BrokenHistoryIsRepairedOnEveryTurn) {
  Front front([] { return engine_->endpoint(); }, with_fork());
  auto c = front.client();
  auto d = direct();
  json messages = json::array(
      {{{"role", "system"}, {"content", "You are an agent with tools."}},
       {{"role", "user"}, {"content", "Read notes.md"}},
       {{"role", "assistant"},
        {"content", nullptr},
        {"tool_calls", json::array({{{"id", "call_1"}, {"type", "function"},
                                     {"function", {{"name", "read_file"}, {"arguments", "{\"path\": \"notes.md\", \"mode\": \"r"}}}}})}},
       {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "the notes"}},
       {{"role", "user"}, {"content", "Thanks. Summarise."}}});
  json body = {{"messages", messages}, {"tools", tools()}, {"max_tokens", 4},
               {"logit_bias", engine_->word_bias()}};
  auto straight = post_json(d, "/v1/chat/completions", body);
  EXPECT_EQ(straight.status, 500) << straight.raw;
  EXPECT_NE(straight.raw.find("Failed to parse tool call arguments as JSON"), std::string::npos) << straight.raw;
  for (int turn = 0; turn < 2; ++turn) {
    auto a = post_json(c, "/v1/chat/completions", body);
    ASSERT_EQ(a.status, 200) << "turn " << turn << ": " << a.raw;
    body["messages"].push_back(a.body["choices"][0]["message"]);
    body["messages"].push_back({{"role", "user"}, {"content", "And then?"}});
  }
  auto metrics = c.Get("/metrics")->body;
  EXPECT_NE(metrics.find("kvgate_history_repairs_total{kind="), std::string::npos) << metrics;
}

}  // namespace
}  // namespace kvgate::gateway
