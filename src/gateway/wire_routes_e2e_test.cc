// The Anthropic Messages and OpenAI Responses routes over raw HTTP, in front of the real
// engine: what the official SDKs' tests (wire_client_e2e_test) do not reach — the HEAD probe,
// the model listing, errors in each API's shape before any turn, exact token counts against
// the engine's own usage, stored responses across a restart and across keys.
#include <gtest/gtest.h>

#include <filesystem>

#include "testing/gateway_e2e.h"
#include "util/json.h"

namespace kvgate::gateway {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const char* kKey = "wire-key";
const char* kOtherKey = "other-key";

class WireRoutesE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // The bias that keeps the random-weight model to plain words goes on the engine's command
    // line: these wire formats have no logit_bias field.
    json bias = testing::Engine::start({.context = 2048})->word_bias();
    engine_ = testing::Engine::start({.context = 8192, .slots = 1, .args = testing::word_bias_flags(bias)}).release();
    db_ = fs::temp_directory_path() / ("kvgate_wire_routes_" + std::to_string(::getpid()) + ".db");
    front_ = new testing::Front([] { return engine_->endpoint(); }, options());
    ASSERT_TRUE(front_->gateway().open_store(db_).ok());
  }
  static void TearDownTestSuite() {
    delete front_;
    delete engine_;
    for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(db_.string() + suffix);
  }
  static GatewayOptions options() {
    return {.api_keys = {kKey, kOtherKey}, .model_name = "tiny-qwen3.gguf"};
  }

  static testing::JsonAnswer post(const std::string& path, const json& body, const char* key = kKey,
                                  httplib::Headers extra = {}) {
    auto c = front_->client();
    if (key != nullptr) extra.emplace("x-api-key", key);
    return testing::post_json(c, path, body, extra);
  }
  static testing::JsonAnswer get(const std::string& path, const char* key = kKey) {
    auto c = front_->client();
    auto r = c.Get(path, {{"Authorization", std::string("Bearer ") + key}});
    testing::JsonAnswer a;
    if (!r) return a;
    a.status = r->status;
    a.raw = r->body;
    a.body = json::parse(r->body, nullptr, false);
    return a;
  }

  static json message_request(const std::string& text, int max_tokens = 6) {
    return {{"model", "claude-sonnet-4-5"},
            {"max_tokens", max_tokens},
            {"system", "You are terse."},
            {"messages", json::array({{{"role", "user"}, {"content", text}}})}};
  }

  static testing::Engine* engine_;
  static testing::Front* front_;
  static fs::path db_;
};
testing::Engine* WireRoutesE2eTest::engine_ = nullptr;
testing::Front* WireRoutesE2eTest::front_ = nullptr;
fs::path WireRoutesE2eTest::db_;

TEST_F(WireRoutesE2eTest, HeadOfTheBaseUrlAnswersWithoutABody) {
  auto c = front_->client();
  auto r = c.Head("/");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE(r->body.empty());
  // The connection stays usable after a HEAD answer (no stray body bytes on it).
  auto after = c.Get("/v1/models", {{"x-api-key", kKey}});
  ASSERT_TRUE(after);
  EXPECT_EQ(after->status, 200);
}

TEST_F(WireRoutesE2eTest, TheModelIsListedUnderItsReadableNameAndAnyNameRetrievesIt) {
  auto list = get("/v1/models");
  ASSERT_EQ(list.status, 200) << list.raw;
  ASSERT_EQ(list.body["data"].size(), 1U);
  EXPECT_EQ(list.body["data"][0]["id"], "tiny-qwen3");
  EXPECT_EQ(list.body["data"][0]["object"], "model");  // OpenAI's clients
  EXPECT_EQ(list.body["data"][0]["type"], "model");    // Anthropic's
  EXPECT_EQ(list.body["has_more"], false);
  EXPECT_EQ(list.body["data"][0]["created_at"].get<std::string>().substr(0, 2), "20") << list.raw;  // a real date
  auto one = get("/v1/models/claude-sonnet-4-5");
  ASSERT_EQ(one.status, 200);
  EXPECT_EQ(one.body["id"], "claude-sonnet-4-5");
  EXPECT_EQ(get("/v1/models", "wrong").status, 401);
}

TEST_F(WireRoutesE2eTest, MessagesErrorsAreInAnthropicsShapeBeforeAnyTurn) {
  auto no_key = post("/v1/messages", message_request("hi"), nullptr);
  EXPECT_EQ(no_key.status, 401);
  EXPECT_EQ(no_key.body["type"], "error") << no_key.raw;
  EXPECT_EQ(no_key.body["error"]["type"], "authentication_error") << no_key.raw;

  json no_max = message_request("hi");
  no_max.erase("max_tokens");
  auto bad = post("/v1/messages", no_max);
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.body["error"]["type"], "invalid_request_error") << bad.raw;
  EXPECT_NE(bad.body["error"]["message"].get<std::string>().find("max_tokens"), std::string::npos) << bad.raw;

  auto c = front_->client();
  auto not_json = c.Post("/v1/messages?beta=true", {{"x-api-key", kKey}}, "{not json", "application/json");
  ASSERT_TRUE(not_json);
  EXPECT_EQ(not_json->status, 400);
  EXPECT_EQ(json::parse(not_json->body)["error"]["type"], "invalid_request_error") << not_json->body;

  auto wrong_method = get("/v1/messages");
  EXPECT_EQ(wrong_method.status, 405);
  EXPECT_EQ(wrong_method.body["type"], "error") << wrong_method.raw;
}

// The test engine has no vision projector: an image is refused with a 400 that says so, in
// Anthropic's shape (an engine with one receives it as an image_url part).
TEST_F(WireRoutesE2eTest, AnImageTheEngineCannotSeeIsAClear400) {
  json request = message_request("What is in the picture?");
  request["messages"][0]["content"] = json::array(
      {{{"type", "image"},
        {"source", {{"type", "base64"}, {"media_type", "image/png"},
                    {"data", "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="}}}},
       {{"type", "text"}, {"text", "What is in the picture?"}}});
  auto a = post("/v1/messages", request);
  EXPECT_EQ(a.status, 400) << a.raw;
  EXPECT_EQ(a.body["type"], "error") << a.raw;
  EXPECT_EQ(a.body["error"]["type"], "invalid_request_error") << a.raw;
  EXPECT_NE(a.raw.find("image"), std::string::npos) << a.raw;
}

TEST_F(WireRoutesE2eTest, CountTokensIsThePromptTheEngineProcesses) {
  const json request = message_request("Count the tokens of this sentence, please.");
  auto count = post("/v1/messages/count_tokens", request);
  ASSERT_EQ(count.status, 200) << count.raw;
  auto made = post("/v1/messages?beta=true", request, kKey, {{"anthropic-version", "2023-06-01"}});
  ASSERT_EQ(made.status, 200) << made.raw;
  const json& u = made.body["usage"];
  EXPECT_EQ(count.body["input_tokens"].get<int64_t>(),
            u["input_tokens"].get<int64_t>() + u["cache_read_input_tokens"].get<int64_t>())
      << count.raw << " vs " << made.raw;

  const json input = {{"model", "gpt-5"}, {"input", "Count these tokens too."}, {"max_output_tokens", 6}};
  auto counted = post("/v1/responses/input_tokens", input);
  ASSERT_EQ(counted.status, 200) << counted.raw;
  EXPECT_EQ(counted.body["object"], "response.input_tokens");
  auto answered = post("/v1/responses", input);
  ASSERT_EQ(answered.status, 200) << answered.raw;
  EXPECT_EQ(counted.body["input_tokens"], answered.body["usage"]["input_tokens"]) << answered.raw;
}

TEST_F(WireRoutesE2eTest, AStreamedMessageFollowsAnthropicsEventOrder) {
  json request = message_request("Say something.", 8);
  request["stream"] = true;
  auto c = front_->client();
  auto r = c.Post("/v1/messages", {{"x-api-key", kKey}}, request.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  std::vector<std::string> names;
  json delta;
  size_t at = 0;
  while ((at = r->body.find("event: ", at)) != std::string::npos) {
    const size_t end = r->body.find('\n', at);
    names.push_back(r->body.substr(at + 7, end - at - 7));
    if (names.back() == "message_delta") {
      const size_t data = r->body.find("data: ", end);
      delta = json::parse(r->body.substr(data + 6, r->body.find('\n', data) - data - 6));
    }
    at = end;
  }
  ASSERT_GE(names.size(), 3U) << r->body;
  EXPECT_EQ(names.front(), "message_start");
  EXPECT_EQ(names.back(), "message_stop");
  EXPECT_EQ(names[names.size() - 2], "message_delta");
  EXPECT_GT(delta["usage"]["output_tokens"].get<int>(), 0) << delta.dump();
}

TEST_F(WireRoutesE2eTest, AStoredResponseContinuesAfterARestartAndOnlyForItsKey) {
  const json first = {{"model", "gpt-5"}, {"input", "Remember the word heliotrope."}, {"max_output_tokens", 6}};
  auto r1 = post("/v1/responses", first);
  ASSERT_EQ(r1.status, 200) << r1.raw;
  const std::string id = r1.body["id"].get<std::string>();
  EXPECT_EQ(id.rfind("resp_", 0), 0U);

  // Another key cannot read it or continue from it.
  EXPECT_EQ(get("/v1/responses/" + id, kOtherKey).status, 404);
  auto stolen = post("/v1/responses", {{"input", "go on"}, {"previous_response_id", id}}, kOtherKey);
  EXPECT_EQ(stolen.status, 400) << stolen.raw;
  EXPECT_EQ(stolen.body["error"]["code"], "previous_response_not_found") << stolen.raw;

  // A second gateway on the same store (kvgate restarted) continues it.
  testing::Front restarted([] { return engine_->endpoint(); }, options());
  ASSERT_TRUE(restarted.gateway().open_store(db_).ok());
  auto c = restarted.client();
  auto again = c.Get("/v1/responses/" + id, {{"x-api-key", kKey}});
  ASSERT_TRUE(again);
  ASSERT_EQ(again->status, 200) << again->body;
  EXPECT_EQ(json::parse(again->body)["id"], id);
  auto r2 = testing::post_json(c, "/v1/responses",
                               {{"input", "Which word?"}, {"previous_response_id", id}, {"max_output_tokens", 6}},
                               {{"x-api-key", kKey}});
  ASSERT_EQ(r2.status, 200) << r2.raw;
  // The continuation's prompt holds the first exchange: more tokens than the first prompt,
  // most of them read from the engine's cache.
  const int64_t in1 = r1.body["usage"]["input_tokens"].get<int64_t>();
  const int64_t in2 = r2.body["usage"]["input_tokens"].get<int64_t>();
  EXPECT_GT(in2, in1 + 3) << r2.raw;
  EXPECT_GE(r2.body["usage"]["input_tokens_details"]["cached_tokens"].get<int64_t>(), in1 / 2) << r2.raw;

  json unstored = first;
  unstored["store"] = false;
  auto r3 = post("/v1/responses", unstored);
  ASSERT_EQ(r3.status, 200) << r3.raw;
  EXPECT_EQ(get("/v1/responses/" + r3.body["id"].get<std::string>()).status, 404);
}

}  // namespace
}  // namespace kvgate::gateway
