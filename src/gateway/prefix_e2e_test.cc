// The append-only client's prompt is a token prefix of its next one (issue: exact prefix):
// with thinking off, a reply before a new user message renders as it was generated, on a
// dense model and on a hybrid one (gated delta net layers, which cannot roll back: there a
// mismatch anywhere costs the whole prompt). The engine runs with the model's template made
// prefix-stable, as kvgate up starts it.
#include <gtest/gtest.h>

#include "testing/fork_param.h"
#include "testing/gateway_e2e.h"

namespace kvgate::gateway {
namespace {

using nlohmann::json;
using testing::plain_chat;
using testing::post_json;

// A user message of some hundred tokens, different per turn.
std::string long_message(int turn) {
  std::string s = "Turn " + std::to_string(turn) + ". ";
  for (int i = 0; i < 12; ++i) {
    s += "Item " + std::to_string(turn * 100 + i) + " of the list: the river, the road and the bridge. ";
  }
  return s;
}

// Four user turns, each the previous request, its reply and a new message. Returns, per turn
// after the first, the previous prompt's tokens and the tokens the engine reused.
std::vector<std::pair<uint64_t, uint64_t>> append_only_turns(testing::Front& front) {
  auto c = front.client();
  json messages = json::array({{{"role", "system"}, {"content", "You are a helpful assistant."}}});
  std::vector<std::pair<uint64_t, uint64_t>> out;
  uint64_t previous = 0;
  for (int turn = 0; turn < 4; ++turn) {
    messages.push_back({{"role", "user"}, {"content", long_message(turn)}});
    auto a = post_json(c, "/v1/chat/completions", plain_chat(messages, 12));
    EXPECT_EQ(a.status, 200) << a.raw;
    if (a.status != 200) return out;
    const uint64_t prompt = a.body["usage"]["prompt_tokens"];
    const uint64_t cached = a.body["usage"]["prompt_tokens_details"].value("cached_tokens", uint64_t{0});
    std::printf("turn %d: prompt %llu, %llu from the cache, reply %llu\n", turn,
                static_cast<unsigned long long>(prompt), static_cast<unsigned long long>(cached),
                static_cast<unsigned long long>(a.body["usage"].value("completion_tokens", 0)));
    if (turn > 0) out.emplace_back(previous, cached);
    previous = prompt;
    messages.push_back(a.body["choices"][0]["message"]);
  }
  return out;
}

class DensePrefixE2eTest : public testing::EngineSuite<DensePrefixE2eTest> {
 public:
  static testing::EngineOptions engine_options() { return {.context = 8192, .slots = 1}; }
};
KVGATE_BOTH_ENGINES(DensePrefixE2eTest);

class HybridPrefixE2eTest : public testing::EngineSuite<HybridPrefixE2eTest> {
 public:
  static testing::EngineOptions engine_options() {
    return {.spec = *gguf::synth_defaults("qwen35"), .context = 8192, .slots = 1};
  }
};
KVGATE_BOTH_ENGINES(HybridPrefixE2eTest);

TEST_P(DensePrefixE2eTest, EachUserTurnReusesAllOfThePreviousPrompt) {
  testing::Front front([] { return engine_->endpoint(); }, with_fork({.slots = 1}));
  const auto turns = append_only_turns(front);
  ASSERT_EQ(turns.size(), 3u);
  for (const auto& [previous, cached] : turns) EXPECT_GE(cached, previous);
}

TEST_P(HybridPrefixE2eTest, EachUserTurnReusesAllOfThePreviousPrompt) {
  testing::Front front([] { return engine_->endpoint(); }, with_fork({.slots = 1}));
  const auto turns = append_only_turns(front);
  ASSERT_EQ(turns.size(), 3u);
  for (const auto& [previous, cached] : turns) EXPECT_GE(cached, previous);
}

}  // namespace
}  // namespace kvgate::gateway
