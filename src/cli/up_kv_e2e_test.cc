// Conversations' engine state across restarts, through the real `kvgate up` (the binary) and
// the real pinned engine: a conversation grown past 12K tokens, then the engine SIGKILLed
// (the supervisor starts a new one) and kvgate itself SIGKILLed and started again. With the
// state saved the next turn is restored instead of prefilled; with --kv-disk 0 it is not.
#include <random>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <unistd.h>

#include "engine/pinned.h"
#include "gguf/file.h"
#include "gguf/synth.h"
#include "testing/engines_under_test.h"
#include "testing/eventually.h"
#include "testing/gateway_e2e.h"
#include "testing/up_test_support.h"
#include "util/net.h"

namespace kvgate::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;
using testing::UpProcess;

struct Turn {
  uint64_t prompt = 0, cached = 0;
  double prefilled_share() const {
    return prompt == 0 ? 1.0 : static_cast<double>(prompt - cached) / static_cast<double>(prompt);
  }
  // The figures of the turn after `what`, printed for the record.
  void print(const char* what) const {
    std::printf("%s: next turn %llu prompt tokens, %llu cached (prefilled %.3f)\n", what,
                static_cast<unsigned long long>(prompt), static_cast<unsigned long long>(cached), prefilled_share());
  }
};

class UpKvStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("kvgate_up_kv_{}_{}", ::getpid(),
                                                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto vocab_path = engine::vocab_file("qwen2");
    ASSERT_TRUE(vocab_path.ok());
    auto vocab = gguf::File::open(*vocab_path);
    ASSERT_TRUE(vocab.ok());
    model_ = dir_ / "m.gguf";
    ASSERT_TRUE(gguf::synthesize(*gguf::synth_defaults("qwen3"), &*vocab, model_).ok());
    auto port = util::pick_free_port();
    ASSERT_TRUE(port.ok());
    port_ = *port;
  }
  void TearDown() override {
    up_.reset();
    fs::remove_all(dir_);
  }

  void start(const std::vector<std::string>& extra) {
    std::vector<std::string> a = {model_.string(),
                                  "--listen",
                                  fmt::format("127.0.0.1:{}", port_),
                                  "--ctx",
                                  "32768",
                                  "--threads",
                                  testing::engine_threads(),
                                  "--cache-ram",
                                  "0",
                                  "--backoff",
                                  "200ms",
                                  "--log-dir",
                                  (dir_ / "logs").string(),
                                  "--state-dir",
                                  (dir_ / "state").string()};
    a.insert(a.end(), extra.begin(), extra.end());
    up_ = std::make_unique<UpProcess>(a);
    turns_ = 0;
    ASSERT_TRUE(up_->wait_ready()) << up_->output();
    httplib::Client c("127.0.0.1", port_);
    auto res = c.Post("/tokenize", R"({"content":" the of and to a in is it that for on with as was he by at"})",
                      "application/json");
    ASSERT_TRUE(res && res->status == 200);
    bias_ = json::array();
    // (Parsed into a variable: a range-for over a member of a temporary reads freed memory.)
    const json reply = json::parse(res->body, nullptr, false);
    if (reply.is_object()) {
      for (const auto& id : reply.value("tokens", json::array())) bias_.push_back({id, 100});
    }
  }

  // One turn of the conversation; appends the answer and the next question.
  Turn turn(json& messages) {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(300s);
    auto a = testing::post_json(c, "/v1/chat/completions",
                                         {{"messages", messages}, {"max_tokens", 8}, {"logit_bias", bias_}});
    EXPECT_EQ(a.status, 200) << a.raw.substr(0, 300);
    if (a.status != 200) return {};
    ++turns_;
    messages.push_back(a.body["choices"][0]["message"]);
    messages.push_back({{"role", "user"}, {"content", fmt::format("Question {}: {}", messages.size(), words(100))}});
    return {a.body["usage"]["prompt_tokens"].get<uint64_t>(),
            a.body["usage"]["prompt_tokens_details"]["cached_tokens"].get<uint64_t>()};
  }
  std::string words(size_t n) {
    std::string text;
    for (size_t i = 0; i < n; ++i) text += fmt::format(" w{}", rng_() % 700);
    return text;
  }
  // A conversation grown past `tokens` prompt tokens.
  json grown(uint64_t tokens) {
    json messages = json::array({{{"role", "user"}, {"content", "A long task." + words(3000)}}});
    for (Turn t = turn(messages); t.prompt < tokens && t.prompt > 0;) t = turn(messages);
    return messages;
  }
  // Until every turn's state was saved: kvgate saves after it answered.
  void wait_for_saves() {
    ASSERT_TRUE(testing::eventually([&] { return up_->events("kv_save").size() >= turns_; })) << up_->output();
  }
  // Kills the engine once the last turn's state was saved (kvgate saves after it answered:
  // ~10 ms here) and waits until a new engine serves.
  void kill_engine_and_wait(bool saving) {
    if (saving) {
      ASSERT_NO_FATAL_FAILURE(wait_for_saves());
    }
    const int starts = up_->engine_starts();
    ASSERT_GT(up_->engine_pid(), 0);
    ASSERT_EQ(::kill(up_->engine_pid(), SIGKILL), 0);
    const auto deadline = std::chrono::steady_clock::now() + 120s;
    while (up_->engine_starts() == starts && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(100ms);
    ASSERT_GT(up_->engine_starts(), starts) << up_->output();
    httplib::Client c("127.0.0.1", port_);
    while (std::chrono::steady_clock::now() < deadline) {
      auto h = c.Get("/health");
      if (h && h->status == 200) return;
      std::this_thread::sleep_for(100ms);
    }
    FAIL() << "the engine did not come back";
  }

  fs::path dir_;
  fs::path model_;
  uint16_t port_ = 0;
  std::unique_ptr<UpProcess> up_;
  json bias_;
  std::mt19937 rng_{7};
  size_t turns_ = 0;  // answered by the current kvgate process
};

TEST_F(UpKvStateTest, AfterTheEngineOrKvgateIsKilledTheNextTurnIsRestored) {
  start({});
  json messages = grown(12000);
  ASSERT_NO_FATAL_FAILURE(kill_engine_and_wait(true));
  const Turn after_engine = turn(messages);
  after_engine.print("engine SIGKILLed");
  EXPECT_GE(after_engine.prompt, 12000u);
  EXPECT_LT(after_engine.prefilled_share(), 0.05);
  ASSERT_FALSE(up_->events("kv_restore").empty()) << up_->output().substr(0, 4000);

  ASSERT_NO_FATAL_FAILURE(wait_for_saves());
  up_->kill9();
  up_.reset();
  start({});
  const Turn after_kvgate = turn(messages);
  after_kvgate.print("kvgate SIGKILLed and started again");
  EXPECT_LT(after_kvgate.prefilled_share(), 0.05);
}

TEST_F(UpKvStateTest, WithoutSavedStateTheNextTurnIsPrefilledAgain) {
  start({"--kv-disk", "0"});
  EXPECT_NE(up_->output().find("engine state not saved"), std::string::npos) << up_->output();
  json messages = grown(12000);
  ASSERT_NO_FATAL_FAILURE(kill_engine_and_wait(false));
  const Turn after_engine = turn(messages);
  after_engine.print("--kv-disk 0, engine SIGKILLed");
  EXPECT_GT(after_engine.prefilled_share(), 0.95);
}

}  // namespace
}  // namespace kvgate::cli
