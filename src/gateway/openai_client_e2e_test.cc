// The official OpenAI client (npm "openai", run with node) against kvgate in front of the
// real engine: what agent frameworks actually use must work unchanged.
#include <gtest/gtest.h>

#include <mutex>

#include "testing/gateway_e2e.h"
#include "testing/paths.h"
#include "util/subprocess.h"

namespace kvgate::gateway {
namespace {

using nlohmann::json;

class OpenAiClientE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    engine_ = testing::Engine::start({.context = 8192, .slots = 1}).release();
    front_ = new testing::Front([] { return engine_->endpoint(); }, {.api_keys = {"client-key"}});
  }
  static void TearDownTestSuite() {
    delete front_;
    delete engine_;
  }

  static json run(const std::string& scenario) {
    const std::string script = std::string(kvgate::testing::source_dir()) + "/tests/npm/openai_client.mjs";
    std::string out;
    std::mutex mu;
    auto proc = util::Subprocess::spawn(
        {.argv = {"/usr/bin/env", "node", script, "http://127.0.0.1:" + std::to_string(front_->port()) + "/v1",
                  "client-key", scenario, bias_argument()},
         .on_line = [&](std::string_view l) {
           std::lock_guard lock(mu);
           out.append(l);
         }});
    if (!proc.ok()) return {{"thrown", proc.error().message()}};
    (*proc)->wait_for(std::chrono::seconds(180));
    (*proc)->stop();
    std::lock_guard lock(mu);
    auto j = json::parse(out, nullptr, false);
    return j.is_discarded() ? json{{"thrown", "not JSON: " + out.substr(0, 1000)}} : j;
  }

  static std::string bias_argument() {
    nlohmann::json m = nlohmann::json::object();
    for (const auto& pair : engine_->word_bias()) m[std::to_string(pair[0].get<int>())] = pair[1];
    return m.dump();
  }

  static testing::Engine* engine_;
  static testing::Front* front_;
};
testing::Engine* OpenAiClientE2eTest::engine_ = nullptr;
testing::Front* OpenAiClientE2eTest::front_ = nullptr;

TEST_F(OpenAiClientE2eTest, Chat) {
  auto r = run("chat");
  ASSERT_FALSE(r.contains("thrown")) << r.dump();
  EXPECT_TRUE(r["content"].is_string());
  EXPECT_FALSE(r["content"].get<std::string>().empty());
  EXPECT_GT(r["usage"]["prompt_tokens"].get<int>(), 0);
}

TEST_F(OpenAiClientE2eTest, Streaming) {
  auto r = run("stream");
  ASSERT_FALSE(r.contains("thrown")) << r.dump();
  EXPECT_GT(r["chunks"].get<int>(), 2);
  EXPECT_FALSE(r["content"].get<std::string>().empty());
  EXPECT_GT(r["usage"]["completion_tokens"].get<int>(), 0);
}

TEST_F(OpenAiClientE2eTest, ErrorsAreOpenAiErrorsAndDoNotPoisonTheClient) {
  auto r = run("bad-request");
  EXPECT_EQ(r["status"], 400) << r.dump();
  EXPECT_EQ(r["type"], "invalid_request_error") << r.dump();
  EXPECT_EQ(r["param"], "messages[0].role") << r.dump();
  auto after = run("after-error");
  ASSERT_FALSE(after.contains("thrown")) << after.dump();
  EXPECT_TRUE(after["content"].is_string());
}

}  // namespace
}  // namespace kvgate::gateway
