// Keys and the engine's cache, end to end: with two client keys, one key sending another's
// prompt gets from the real engine what it would get had the other never sent it (kvgate
// clears a slot another key's content is in, kvstate/slot_tenants.h), while a key continuing its
// own conversation keeps its cache hits. The engine is started as `kvgate up` starts it with
// several keys (--cache-ram 0: cli/up_options.cc keep_keys_apart) and with saved states.
#include <filesystem>
#include <random>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "bench/engine_queries.h"
#include "testing/gateway_e2e.h"

namespace kvgate::gateway {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::Engine;
using testing::Front;
using testing::post_json;

// A system prompt of `words` words only this test sends (a PIN in the middle of it).
std::string secret_prompt(uint32_t seed, size_t words) {
  std::mt19937 rng(seed);
  std::string text = "You are the assistant of one person. Their PIN is 4721. Notes:";
  for (size_t i = 0; i < words; ++i) text += fmt::format(" n{}", rng() % 900);
  return text;
}

json msg(const std::string& role, const std::string& content) {
  return {{"role", role}, {"content", content}};
}

struct Figures {
  int status = 0;
  uint64_t prompt = 0, cached = 0;
  json reply;
};

// The engine's own counters (llama-server --metrics): prompt tokens computed and reused.
bench::EngineCounters counters(Engine& e) {
  httplib::Client c("127.0.0.1", e.endpoint().port);
  c.set_bearer_token_auth(e.api_key().c_str());
  auto res = c.Get("/metrics");
  if (!res || res->status != 200) return {};
  auto parsed = bench::parse_engine_counters(res->body);
  return parsed.ok() ? *parsed : bench::EngineCounters{};
}

class CacheOracleE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / fmt::format("kvgate-cache-oracle-{}", ::getpid());
    fs::remove_all(dir_);
    engine_ = start_engine("main").release();
  }
  static void TearDownTestSuite() {
    delete engine_;
    engine_ = nullptr;
    fs::remove_all(dir_);
  }
  // One slot, so every key's conversation takes turns on it; no host prompt cache; states
  // saved into a folder of its own (as `kvgate up` with several keys).
  static std::unique_ptr<Engine> start_engine(const std::string& name) {
    fs::create_directories(dir_ / name);
    return Engine::start({.context = 8192,
                          .slots = 1,
                          .args = {"--cache-ram", "0", "--slot-save-path", (dir_ / name).string()}});
  }
  static std::unique_ptr<Front> front(const std::string& name) {
    GatewayOptions o;
    o.slots = 1;
    o.api_keys = {"key-a", "key-b"};
    o.kv.dir = dir_ / name;
    o.kv.disk_budget_bytes = 1ULL << 30;
    o.kv.identity = {{"test", "cache-oracle"}};
    return std::make_unique<Front>([name] { return (name == "main" ? engine_ : fresh_)->endpoint(); }, o);
  }
  static Figures chat(Front& f, const std::string& key, const json& messages) {
    auto c = f.client();
    auto a = post_json(c, "/v1/chat/completions", testing::plain_chat(messages, 4),
                       {{"Authorization", "Bearer " + key}});
    Figures out{.status = a.status};
    if (a.status != 200) return out;
    out.prompt = a.body["usage"]["prompt_tokens"];
    out.cached = a.body["usage"]["prompt_tokens_details"]["cached_tokens"];
    out.reply = a.body["choices"][0]["message"];
    return out;
  }

  static Engine* engine_;
  static Engine* fresh_;
  static fs::path dir_;
};
Engine* CacheOracleE2eTest::engine_ = nullptr;
Engine* CacheOracleE2eTest::fresh_ = nullptr;
fs::path CacheOracleE2eTest::dir_;

TEST_F(CacheOracleE2eTest, AnotherKeySendingAKeysPromptReusesNothingOfItAndTheKeyKeepsItsHits) {
  const std::string system = secret_prompt(41, 300);
  const json probe = json::array({msg("system", system), msg("user", "What is the PIN?")});

  // What key B gets for the probe from an engine that never saw it.
  auto fresh_engine = start_engine("fresh");
  fresh_ = fresh_engine.get();
  Figures baseline;
  {
    auto f = front("fresh");
    baseline = chat(*f, "key-b", probe);
  }
  fresh_ = nullptr;
  fresh_engine.reset();
  ASSERT_EQ(baseline.status, 200);

  // Key A works with the system prompt: three turns, each reusing the one before.
  auto f = front("main");
  json a = json::array({msg("system", system)});
  Figures last_a;
  for (int turn = 0; turn < 3; ++turn) {
    a.push_back(msg("user", fmt::format("Turn {} of key A: please keep going with the notes.", turn)));
    last_a = chat(*f, "key-a", a);
    ASSERT_EQ(last_a.status, 200);
    a.push_back(last_a.reply);
  }
  ASSERT_GT(last_a.cached, 0u) << "key A's own turns reuse its cache";

  // Key B sends A's system prompt: the figures of a fresh engine, and the engine computed it all.
  const auto before = counters(*engine_);
  const Figures b = chat(*f, "key-b", probe);
  const auto after = counters(*engine_);
  ASSERT_EQ(b.status, 200);
  EXPECT_EQ(b.prompt, baseline.prompt);
  EXPECT_EQ(b.cached, baseline.cached)
      << "key B reused " << b.cached << " of " << b.prompt << " tokens that key A sent";
  EXPECT_EQ(after.processed - before.processed, static_cast<double>(b.prompt - baseline.cached))
      << "the engine's own count of prompt tokens it computed for key B";
  if (after.cached_known) {
    EXPECT_EQ(after.cached - before.cached, static_cast<double>(baseline.cached));
  }

  // Key A's next turn: its own state again (restored), so all of its previous prompt is reused.
  a.push_back(msg("user", "Turn 3 of key A: and once more."));
  const Figures next = chat(*f, "key-a", a);
  ASSERT_EQ(next.status, 200);
  constexpr uint64_t kTolerance = 4;  // the previous prompt's last tokens (its generation prompt)
  EXPECT_GE(next.cached + kTolerance, last_a.prompt)
      << "key A reused " << next.cached << " tokens; its previous prompt had " << last_a.prompt;
  auto c = f->client();
  auto metrics = c.Get("/metrics", {{"Authorization", "Bearer key-a"}});
  ASSERT_TRUE(metrics && metrics->status == 200);
  EXPECT_NE(metrics->body.find("kvgate_slot_clears_total{how=\"erase\"}"), std::string::npos)
      << "B's slot was cleared";
}

// A raw completion names its slot itself (id_slot) or lets the engine pick the one whose cache
// matches best: with several keys, kvgate chooses, and clears what another key left there.
TEST_F(CacheOracleE2eTest, ARawCompletionOfAnotherKeyReusesNothingEvenNamingTheSlot) {
  auto f = front("main");
  auto c = f->client();
  const std::string prompt = secret_prompt(43, 200);
  const json body = {{"prompt", prompt},
                     {"max_tokens", 1},
                     {"temperature", 0},
                     {"id_slot", 0},
                     {"logit_bias", testing::plain_chat(json::array())["logit_bias"]}};
  auto first = post_json(c, "/v1/completions", body, {{"Authorization", "Bearer key-a"}});
  ASSERT_EQ(first.status, 200) << first.raw.substr(0, 300);
  const auto own = counters(*engine_);
  auto again = post_json(c, "/v1/completions", body, {{"Authorization", "Bearer key-a"}});
  ASSERT_EQ(again.status, 200);
  const auto before = counters(*engine_);
  // Key A's own repeat reuses its prompt (so the check below can fail).
  EXPECT_LT(before.processed - own.processed,
            static_cast<double>(again.body["usage"]["prompt_tokens"].get<uint64_t>()) / 2);
  auto other = post_json(c, "/v1/completions", body, {{"Authorization", "Bearer key-b"}});
  const auto after = counters(*engine_);
  ASSERT_EQ(other.status, 200);
  const uint64_t prompt_tokens = other.body["usage"]["prompt_tokens"];
  EXPECT_EQ(after.processed - before.processed, static_cast<double>(prompt_tokens))
      << "key B's completion reused key A's prompt";
}

}  // namespace
}  // namespace kvgate::gateway
