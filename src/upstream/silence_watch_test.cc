#include "upstream/silence_watch.h"

#include <atomic>
#include <thread>

#include <gtest/gtest.h>

#include "upstream/engine_counters.h"
#include "upstream/model_id.h"

namespace kvgate::gateway {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

// An engine whose stream is silent; its /slots reports slot 0's decoded tokens, which grow
// while `working` is set.
class SilentEngine : public Upstream {
 public:
  UpstreamResult<UpstreamResponse> call(const std::string&, const std::string& path, const std::string&,
                                        std::chrono::milliseconds, CancelScope*) override {
    if (path != "/slots" || !has_slots) return UpstreamResponse{.status = 404, .body = ""};
    if (working) decoded += 7;
    json slots =
        json::array({{{"id", 1}, {"next_token", json::array({{{"n_decoded", 999}}})}},
                     {{"id", 0},
                      {"n_prompt_tokens_processed", 40},
                      {"next_token", json::array({{{"n_decoded", decoded.load()}, {"n_remain", -1}}})}}});
    return UpstreamResponse{.status = 200, .body = slots.dump()};
  }
  UpstreamResult<int> stream(const std::string&, const std::string&, const StreamHandlers&,
                             std::chrono::milliseconds, CancelScope*) override {
    return 200;
  }
  EngineEndpoint endpoint() override { return {}; }
  std::atomic<bool> working{true};
  std::atomic<uint64_t> decoded{0};
  bool has_slots = true;
};

const SilenceWatchOptions kFast{.timeout = 400ms, .poll = 50ms, .tick = 10ms};

TEST(SilenceWatchTest, ASilentEngineThatDecodesIsWorkingAndOneThatStopsIsStuck) {
  SilentEngine engine;
  CancelScope turn, attempt;
  std::atomic<int> progress{0};
  SilenceWatch watch(engine, 0, turn, attempt, kFast, [&](std::string) { ++progress; });
  std::this_thread::sleep_for(1200ms);  // three time-outs of silence, the slot decoding
  EXPECT_FALSE(watch.stuck());
  EXPECT_FALSE(attempt.cancelled());
  EXPECT_GT(progress.load(), 5);
  engine.working = false;
  const auto stopped = std::chrono::steady_clock::now();
  while (!watch.stuck() && std::chrono::steady_clock::now() - stopped < 5s) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(watch.stuck());
  EXPECT_TRUE(attempt.cancelled());
  EXPECT_GE(std::chrono::steady_clock::now() - stopped, 350ms);  // a whole time-out without progress
}

TEST(SilenceWatchTest, WithoutSlotsTheSilenceAloneDecides) {
  SilentEngine engine;
  engine.has_slots = false;
  CancelScope turn, attempt;
  const auto start = std::chrono::steady_clock::now();
  SilenceWatch watch(engine, 0, turn, attempt, kFast, nullptr);
  while (!watch.stuck() && std::chrono::steady_clock::now() - start < 5s) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(watch.stuck());
  EXPECT_GE(std::chrono::steady_clock::now() - start, 400ms);
}

TEST(SilenceWatchTest, AnEngineThatSpeaksIsNeverPolledAndALeavingClientCancelsTheAttempt) {
  SilentEngine engine;
  CancelScope turn, attempt;
  SilenceWatch watch(engine, 0, turn, attempt, kFast, nullptr);
  for (int i = 0; i < 30; ++i) {
    watch.heard();
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(watch.polls(), 0u);
  EXPECT_FALSE(watch.stuck());
  turn.cancel();
  std::this_thread::sleep_for(100ms);
  EXPECT_TRUE(attempt.cancelled());
  EXPECT_FALSE(watch.stuck());
}

TEST(SilenceWatchTest, SlotWorkIsTheSlotsPromptAndDecodedTokens) {
  const json slots = json::array(
      {{{"id", 0}, {"n_prompt_tokens_processed", 40}, {"next_token", json::array({{{"n_decoded", 5}}})}},
       {{"id", 2}, {"next_token", {{"n_decoded", 9}}}}});  // ik: one object
  EXPECT_EQ(slot_work(slots, 0), 45u);
  EXPECT_EQ(slot_work(slots, 2), 9u);
  EXPECT_EQ(slot_work(slots, 1), std::nullopt);
  EXPECT_EQ(slot_work(json::object(), 0), std::nullopt);
  EXPECT_EQ(slot_work(json::array({{{"id", 0}}}), 0), std::nullopt);
}

TEST(EngineCountersTest, TheGrowthOfTheEnginesCounters) {
  const auto a = parse_engine_counters(
      "# HELP x\nllamacpp:prompt_tokens_total 145\nllamacpp:prompt_tokens_cached_total 828\n"
      "llamacpp:tokens_predicted_total 168\nllamacpp:n_decode_total 168\n");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->prompt_computed, 145u);
  EXPECT_EQ(a->prompt_cached, 828u);
  EXPECT_EQ(a->generated, 168u);
  EXPECT_TRUE(a->cached_known);
  const auto b = parse_engine_counters(
      "llamacpp:prompt_tokens_total 273\nllamacpp:prompt_tokens_cached_total 840\n"
      "llamacpp:tokens_predicted_total 192\n");
  const auto g = counters_growth(*a, *b);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->prompt_computed, 128u);
  EXPECT_EQ(g->prompt_cached, 12u);
  EXPECT_EQ(g->generated, 24u);
  EXPECT_FALSE(counters_growth(*b, *a));  // a restarted engine starts again from 0
  EXPECT_FALSE(parse_engine_counters("not metrics"));
  EXPECT_FALSE(parse_engine_counters("llamacpp:prompt_tokens_total 5\n")->cached_known);  // ik
}

TEST(ModelIdTest, AnswersCarryTheListedIdOrTheClientsNeverAPath) {
  EXPECT_EQ(listed_model("/home/me/models/Qwen3-8B-Q4_K_M.gguf"), "Qwen3-8B-Q4_K_M");
  EXPECT_EQ(listed_model("tiny-qwen3.gguf"), "tiny-qwen3");
  EXPECT_EQ(listed_model("org/model"), "org/model");  // an alias keeps its slash
  EXPECT_EQ(listed_model(""), "kvgate");
  EXPECT_EQ(answer_model("", "/m/x.gguf"), "x");
  EXPECT_EQ(answer_model("gpt-5-codex", "/m/x.gguf"), "gpt-5-codex");
}

}  // namespace
}  // namespace kvgate::gateway
