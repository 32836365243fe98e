// Anthropic's context management on the real engine: old tool results cleared and a
// compaction written by the engine, reported in Anthropic's shape with the engine's figures,
// and the next request computing only what it adds to the prompt the engine already holds.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "testing/gateway_e2e.h"

namespace kvgate::gateway {
namespace {

using nlohmann::json;
using testing::Engine;
using testing::Front;
using testing::post_json;

class ContextManagementE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { engine_ = Engine::start({.context = 8192}).release(); }
  static void TearDownTestSuite() {
    delete engine_;
    engine_ = nullptr;
  }
  void SetUp() override {
    GatewayOptions o;
    o.compaction_options.summary_max_tokens = 48;
    front_ = std::make_unique<Front>([] { return engine_->endpoint(); }, o);
  }

  static std::string tool_output(int i) {
    std::string out = fmt::format("$ cat src/module{}.cc\n", i);
    for (int w = 0; w < 40; ++w) out += fmt::format("line {} value {} ok\n", w, (w * 7 + i) % 97);
    return out;
  }

  // An agent's history in Anthropic's shape: `uses` tool uses, each with its result.
  static json agent_messages(int uses) {
    json m = json::array({{{"role", "user"}, {"content", "Review the modules one by one."}}});
    for (int i = 0; i < uses; ++i) {
      const std::string id = fmt::format("toolu_{}", i);
      m.push_back({{"role", "assistant"},
                   {"content", json::array({{{"type", "tool_use"},
                                             {"id", id},
                                             {"name", "read_file"},
                                             {"input", {{"path", fmt::format("src/module{}.cc", i)}}}}})}});
      m.push_back({{"role", "user"},
                   {"content",
                    json::array({{{"type", "tool_result"}, {"tool_use_id", id}, {"content", tool_output(i)}},
                                 {{"type", "text"}, {"text", fmt::format("Next after {}.", i)}}})}});
    }
    return m;
  }

  static json request(json messages, json edits) {
    return {
        {"model", "local"},
        {"max_tokens", 8},
        {"system", "You are a coding agent. Be brief."},
        {"tools", json::array({{{"name", "read_file"},
                                {"description", "Read a file"},
                                {"input_schema",
                                 {{"type", "object"}, {"properties", {{"path", {{"type", "string"}}}}}}}}})},
        {"messages", std::move(messages)},
        {"context_management", {{"edits", std::move(edits)}}}};
  }

  // The prompt tokens of an answer as the engine processed it (cached or computed).
  static uint64_t prompt_of(const json& usage) {
    return usage.value("input_tokens", uint64_t{0}) + usage.value("cache_read_input_tokens", uint64_t{0});
  }

  uint64_t count_tokens(json body) {
    body.erase("max_tokens");
    body.erase("context_management");
    auto c = front_->client();
    auto a = post_json(c, "/v1/messages/count_tokens", body);
    EXPECT_EQ(a.status, 200) << a.raw;
    return a.body.value("input_tokens", uint64_t{0});
  }

  static Engine* engine_;
  std::unique_ptr<Front> front_;
};
Engine* ContextManagementE2eTest::engine_ = nullptr;

TEST_F(ContextManagementE2eTest, OldToolResultsAreClearedOnceAndTheNextTurnKeepsTheCache) {
  auto c = front_->client();
  const json edits = json::array({{{"type", "clear_tool_uses_20250919"},
                                   {"trigger", {{"type", "input_tokens"}, {"value", 600}}},
                                   {"keep", {{"type", "tool_uses"}, {"value", 2}}}}});
  json messages = agent_messages(6);
  const json first = request(messages, edits);
  const uint64_t uncleared = count_tokens(first);
  auto a = post_json(c, "/v1/messages", first);
  ASSERT_EQ(a.status, 200) << a.raw;
  const json& applied = a.body["context_management"]["applied_edits"];
  ASSERT_EQ(applied.size(), 1u) << a.body.dump();
  EXPECT_EQ(applied[0]["type"], "clear_tool_uses_20250919");
  EXPECT_EQ(applied[0]["cleared_tool_uses"], 4);
  // What was cleared is what the engine no longer had to read: the request's own count less
  // the prompt the engine processed.
  const uint64_t prompt1 = prompt_of(a.body["usage"]);
  EXPECT_GT(applied[0]["cleared_input_tokens"].get<uint64_t>(), 0u);
  EXPECT_EQ(applied[0]["cleared_input_tokens"].get<uint64_t>(), uncleared - prompt1) << a.body.dump();

  // The client sends its whole history again, uncleared, one turn longer: the same results
  // stay cleared, nothing new is cleared, and the engine reads the whole earlier prompt from
  // its cache.
  messages.push_back({{"role", "assistant"}, {"content", a.body["content"]}});
  messages.push_back({{"role", "user"}, {"content", "And the summary?"}});
  auto b = post_json(c, "/v1/messages", request(messages, edits));
  ASSERT_EQ(b.status, 200) << b.raw;
  EXPECT_TRUE(b.body["context_management"]["applied_edits"].empty()) << b.body.dump();
  EXPECT_GE(b.body["usage"]["cache_read_input_tokens"].get<uint64_t>(), prompt1) << b.body.dump();
  EXPECT_LT(prompt_of(b.body["usage"]), count_tokens(request(messages, edits)));

  // Below its trigger, nothing is cleared and the answer says so.
  auto small = post_json(c, "/v1/messages", request(agent_messages(1), edits));
  ASSERT_EQ(small.status, 200) << small.raw;
  EXPECT_TRUE(small.body["context_management"]["applied_edits"].empty());
}

TEST_F(ContextManagementE2eTest, ACompactionIsCarriedBackAndTheNextRequestExtendsIt) {
  auto c = front_->client();
  const json edits =
      json::array({{{"type", "compact_20260112"}, {"trigger", {{"type", "input_tokens"}, {"value", 700}}}}});
  json messages = agent_messages(4);
  const json first = request(messages, edits);
  const uint64_t whole = count_tokens(first);
  ASSERT_GT(whole, 700u);
  auto a = post_json(c, "/v1/messages", first);
  ASSERT_EQ(a.status, 200) << a.raw;
  const json& content = a.body["content"];
  ASSERT_GE(content.size(), 1u);
  EXPECT_EQ(content[0]["type"], "compaction") << a.body.dump();
  ASSERT_TRUE(content[0]["content"].is_string());
  EXPECT_FALSE(content[0]["content"].get<std::string>().empty());
  // The answer was computed on the summary, not on the history.
  const uint64_t prompt1 = prompt_of(a.body["usage"]);
  EXPECT_LT(prompt1, whole / 2) << a.body.dump();
  // The summary's own figures come first in usage.iterations, the engine's.
  const json& iterations = a.body["usage"]["iterations"];
  ASSERT_EQ(iterations.size(), 2u) << a.body.dump();
  EXPECT_EQ(iterations[0]["type"], "compaction");
  EXPECT_GT(prompt_of(iterations[0]), 0u);
  EXPECT_EQ(iterations[1]["type"], "message");

  // The client appends the answer, compaction block and all, and asks on: the messages before
  // the block are replaced by it, and the engine reads the compacted prompt from its cache.
  messages.push_back({{"role", "assistant"}, {"content", content}});
  messages.push_back({{"role", "user"}, {"content", "Go on."}});
  auto b = post_json(c, "/v1/messages", request(messages, edits));
  ASSERT_EQ(b.status, 200) << b.raw;
  EXPECT_NE(b.body["content"][0]["type"], "compaction") << b.body.dump();
  EXPECT_GE(b.body["usage"]["cache_read_input_tokens"].get<uint64_t>(), prompt1) << b.body.dump();
  EXPECT_LT(prompt_of(b.body["usage"]), whole);
}

TEST_F(ContextManagementE2eTest, APausedCompactionStreamsTheBlockAlone) {
  auto c = front_->client();
  json body =
      request(agent_messages(3), json::array({{{"type", "compact_20260112"},
                                               {"trigger", {{"type", "input_tokens"}, {"value", 300}}},
                                               {"pause_after_compaction", true}}}));
  body["stream"] = true;
  auto r = c.Post("/v1/messages", body.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const std::string& s = r->body;
  const size_t start = s.find(R"("content_block":{"type":"compaction")");
  const size_t delta = s.find(R"("type":"compaction_delta")");
  const size_t stop = s.find(R"("stop_reason":"compaction")");
  ASSERT_NE(start, std::string::npos) << s;
  ASSERT_NE(delta, std::string::npos) << s;
  ASSERT_NE(stop, std::string::npos) << s;
  EXPECT_LT(start, delta);
  EXPECT_LT(delta, stop);
  EXPECT_EQ(s.find(R"("type":"text_delta")"), std::string::npos)
      << "nothing is sampled after a paused compaction";
  EXPECT_NE(s.find(R"("context_management":{"applied_edits":[]})"), std::string::npos) << s;

  // A request that asks for no context management gets no report, and kvgate's own count of
  // its prompt is still the engine's (the summary's figures taught the counter nothing).
  json plain = request(agent_messages(1), json::array());
  plain.erase("context_management");
  const uint64_t counted = count_tokens(plain);
  auto p = post_json(c, "/v1/messages", plain);
  ASSERT_EQ(p.status, 200) << p.raw;
  EXPECT_FALSE(p.body.contains("context_management"));
  EXPECT_EQ(prompt_of(p.body["usage"]), counted);
}

// The Responses API's shapes: the compaction endpoint Codex calls, its item carried back, and
// the compaction a request's context_management asks for.
json responses_input(int uses) {
  json items = json::array({{{"role", "user"}, {"content", "Review the modules one by one."}}});
  for (int i = 0; i < uses; ++i) {
    const std::string id = fmt::format("call_{}", i);
    items.push_back({{"type", "function_call"},
                     {"call_id", id},
                     {"name", "read_file"},
                     {"arguments", fmt::format(R"({{"path":"src/module{}.cc"}})", i)}});
    std::string out = fmt::format("$ cat src/module{}.cc\n", i);
    for (int w = 0; w < 40; ++w) out += fmt::format("line {} value {} ok\n", w, (w * 7 + i) % 97);
    items.push_back({{"type", "function_call_output"}, {"call_id", id}, {"output", out}});
  }
  return items;
}

json responses_request(json input) {
  return {{"model", "local"},
          {"instructions", "You are a coding agent. Be brief."},
          {"max_output_tokens", 8},
          {"tools",
           json::array(
               {{{"type", "function"},
                 {"name", "read_file"},
                 {"parameters", {{"type", "object"}, {"properties", {{"path", {{"type", "string"}}}}}}}}})},
          {"input", std::move(input)}};
}

uint64_t responses_prompt(const json& usage) { return usage.value("input_tokens", uint64_t{0}); }
uint64_t responses_cached(const json& usage) {
  return usage["input_tokens_details"].value("cached_tokens", uint64_t{0});
}

TEST_F(ContextManagementE2eTest, TheResponsesCompactEndpointAnswersWithAnItemTheNextRequestReads) {
  auto c = front_->client();
  const json whole_request = responses_request(responses_input(4));
  auto whole = post_json(c, "/v1/responses/input_tokens", whole_request);
  ASSERT_EQ(whole.status, 200) << whole.raw;
  const uint64_t whole_tokens = whole.body["input_tokens"];

  auto a = post_json(c, "/v1/responses/compact", whole_request);
  ASSERT_EQ(a.status, 200) << a.raw;
  EXPECT_EQ(a.body["object"], "response.compaction");
  ASSERT_EQ(a.body["output"].size(), 1u) << a.body.dump();
  const json item = a.body["output"][0];
  EXPECT_EQ(item["type"], "compaction");
  ASSERT_TRUE(item["encrypted_content"].is_string());
  // The usage is the engine's for writing the summary: the whole conversation was its prompt.
  EXPECT_GE(responses_prompt(a.body["usage"]), whole_tokens) << a.body.dump();
  EXPECT_GT(a.body["usage"].value("output_tokens", 0), 0);

  // Codex replaces its history with the output and goes on.
  auto b = post_json(c, "/v1/responses",
                     responses_request(json::array({item, {{"role", "user"}, {"content", "Go on."}}})));
  ASSERT_EQ(b.status, 200) << b.raw;
  EXPECT_FALSE(b.body["output"].empty()) << b.body.dump();
  EXPECT_LT(responses_prompt(b.body["usage"]), whole_tokens / 2) << b.body.dump();

  // Another server's compaction item cannot be read here: a 400 naming it, nothing sent.
  json foreign = {{"type", "compaction"}, {"encrypted_content", "gAAAAABo-opaque"}};
  auto f = post_json(c, "/v1/responses",
                     responses_request(json::array({foreign, {{"role", "user"}, {"content", "Go on."}}})));
  EXPECT_EQ(f.status, 400) << f.raw;
  EXPECT_EQ(f.body["error"]["param"], "input.0.encrypted_content") << f.raw;
}

TEST_F(ContextManagementE2eTest, AResponsesCompactionThresholdCompactsAndTheStoredChainContinues) {
  auto c = front_->client();
  json first = responses_request(responses_input(4));
  first["context_management"] = json::array({{{"type", "compaction"}, {"compact_threshold", 700}}});
  auto a = post_json(c, "/v1/responses", first);
  ASSERT_EQ(a.status, 200) << a.raw;
  ASSERT_GE(a.body["output"].size(), 2u) << a.body.dump();
  EXPECT_EQ(a.body["output"][0]["type"], "compaction") << a.body.dump();
  const uint64_t prompt1 = responses_prompt(a.body["usage"]);
  EXPECT_LT(prompt1, 700u);

  // Continued by previous_response_id: the stored conversation starts at the summary, and the
  // engine reads the compacted prompt from its cache.
  json next = responses_request(json::array({{{"role", "user"}, {"content", "Go on."}}}));
  next["previous_response_id"] = a.body["id"];
  auto b = post_json(c, "/v1/responses", next);
  ASSERT_EQ(b.status, 200) << b.raw;
  EXPECT_NE(b.body["output"][0]["type"], "compaction");
  EXPECT_GE(responses_cached(b.body["usage"]), prompt1) << b.body.dump();

  // Streamed: the compaction item is output 0, added and done before the message's events.
  first["stream"] = true;
  auto r = c.Post("/v1/responses", first.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const std::string& events = r->body;
  const size_t added = events.find(R"("output_index":0,"item":{"id":"cmp_)");
  const size_t message = events.find(R"("output_index":1)");
  ASSERT_NE(added, std::string::npos) << events;
  ASSERT_NE(message, std::string::npos) << events;
  EXPECT_LT(added, message);
  EXPECT_NE(events.find(R"("type":"compaction","encrypted_content":"kvgate-summary-v1)"), std::string::npos);
}

}  // namespace
}  // namespace kvgate::gateway
