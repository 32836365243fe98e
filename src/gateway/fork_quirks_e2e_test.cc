// What the two forks do differently at the end of a reply, through kvgate, against both real
// engines: a reply that fills the context, a reply cut by max_tokens, a request that cannot
// fit with compaction off; and on ik, a hybrid model that keeps its cache from turn to turn
// only with the checkpoint tolerance kvgate chooses (plan/engine_quirks.h).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "engine/probe.h"
#include "http/sse.h"
#include "plan/engine_quirks.h"
#include "testing/fork_param.h"
#include "testing/gateway_e2e.h"

namespace kvgate::gateway {

using http::SseParser;

namespace {

using nlohmann::json;
using testing::Engine;
using testing::Front;
using testing::post_json;

// Small, so that filling it stays a few hundred generated tokens even on a loaded machine.
constexpr uint64_t kContext = 512;

class ReplyEndE2eTest : public testing::EngineSuite<ReplyEndE2eTest> {
 public:
  static testing::EngineOptions engine_options() { return {.context = kContext, .slots = 1}; }

 protected:
  std::unique_ptr<Front> front(GatewayOptions o = {}) {
    return std::make_unique<Front>([] { return engine_->endpoint(); }, with_fork(o));
  }
  // A prompt of about `words` tokens of plain words, answered with plain words that never end.
  json endless(size_t words) const {
    std::string text;
    for (size_t i = 0; i < words; ++i) text += fmt::format("w{} ", i % 50);
    return {{"messages", json::array({{{"role", "user"}, {"content", text}}})},
            {"logit_bias", engine_->word_bias()},
            {"ignore_eos", true},
            {"chat_template_kwargs", {{"enable_thinking", false}}}};
  }
};
KVGATE_BOTH_ENGINES(ReplyEndE2eTest);

// Ends with finish_reason "length" and [DONE], no error event; returns the finish reason seen.
std::string stream_finish(const std::string& body) {
  SseParser p;
  auto events = p.feed(body);
  EXPECT_FALSE(events.empty());
  if (events.empty()) return "";
  EXPECT_TRUE(events.back().is_done()) << body.substr(body.size() > 400 ? body.size() - 400 : 0);
  std::string finish;
  for (const auto& ev : events) {
    if (ev.comment_only || ev.is_done()) continue;
    auto j = json::parse(ev.data);
    EXPECT_FALSE(j.contains("error")) << ev.data;
    for (const auto& ch : j.value("choices", json::array())) {
      if (ch.contains("finish_reason") && ch["finish_reason"].is_string()) finish = ch["finish_reason"];
    }
  }
  return finish;
}

// A prompt that fits, without max_tokens, whose reply fills the rest of the context: ik fails
// such a reply with a 500 after generating it ("context shift is disabled"); through kvgate
// both engines answer it, ended by length.
TEST_P(ReplyEndE2eTest, AReplyThatFillsTheContextEndsByLength) {
  auto f = front();
  auto c = f->client();
  auto a = post_json(c, "/v1/chat/completions", endless(60));
  ASSERT_EQ(a.status, 200) << a.raw.substr(0, 600);
  EXPECT_EQ(a.body["choices"][0]["finish_reason"], "length") << a.raw.substr(0, 300);
  const uint64_t prompt = a.body["usage"]["prompt_tokens"].get<uint64_t>();
  const uint64_t completion = a.body["usage"]["completion_tokens"].get<uint64_t>();
  EXPECT_LT(prompt, kContext);
  EXPECT_GT(completion, (kContext - prompt) / 2) << "the reply was cut far before the context was full";
  std::printf("%s non-streamed: prompt %llu + completion %llu of %llu\n", plan::fork_name(GetParam()),
              static_cast<unsigned long long>(prompt), static_cast<unsigned long long>(completion),
              static_cast<unsigned long long>(kContext));

  json streamed = endless(61);
  streamed["stream"] = true;
  auto res = c.Post("/v1/chat/completions", streamed.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body.substr(0, 400);
  EXPECT_EQ(stream_finish(res->body), "length");
}

// The same without an exact count up front: ik's failure is answered by sending the request
// again with the room the (then counted) prompt leaves.
TEST_P(ReplyEndE2eTest, AFilledContextWithoutACountIsSentAgainWithTheRoomLeft) {
  if (GetParam() != plan::Fork::kIk) GTEST_SKIP() << "mainline ends such a reply by length itself";
  GatewayOptions o;
  o.count_tokens = false;  // no exact count before sending
  auto f = front(o);
  auto c = f->client();
  auto a = post_json(c, "/v1/chat/completions", endless(60));
  ASSERT_EQ(a.status, 200) << a.raw.substr(0, 600);
  EXPECT_EQ(a.body["choices"][0]["finish_reason"], "length");
  auto m = c.Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("kvgate_context_filled_retries_total 1"), std::string::npos) << m->body.substr(0, 2000);
}

// max_tokens reached: ik says "stop", kvgate answers "length" as mainline does.
TEST_P(ReplyEndE2eTest, MaxTokensIsLength) {
  auto f = front();
  auto c = f->client();
  json body = endless(20);
  body["max_tokens"] = 5;
  auto a = post_json(c, "/v1/chat/completions", body);
  ASSERT_EQ(a.status, 200) << a.raw;
  EXPECT_EQ(a.body["choices"][0]["finish_reason"], "length") << a.raw;
  EXPECT_EQ(a.body["usage"]["completion_tokens"], 5);
  for (bool usage : {false, true}) {
    body["stream"] = true;
    if (usage) body["stream_options"] = {{"include_usage", true}};
    auto res = c.Post("/v1/chat/completions", body.dump(), "application/json");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200);
    EXPECT_EQ(stream_finish(res->body), "length") << "include_usage " << usage;
  }
}

// With compaction off a request larger than the context is refused with the context's size,
// on ik too (its refusal carries no figures).
TEST_P(ReplyEndE2eTest, TooLargeWithCompactionOffNamesTheContext) {
  GatewayOptions o;
  o.compaction = false;
  auto f = front(o);
  auto c = f->client();
  json body = endless(300);
  body["max_tokens"] = 4;
  auto a = post_json(c, "/v1/chat/completions", body);
  ASSERT_EQ(a.status, 400) << a.raw;
  const std::string message = a.body["error"]["message"];
  EXPECT_NE(message.find(fmt::format("context of {} tokens", kContext)), std::string::npos) << message;
  EXPECT_NE(message.find("compaction is off"), std::string::npos) << message;
  EXPECT_EQ(a.body["error"]["code"], "context_length_exceeded");
}

// Hybrid (recurrent + attention) model on ik: turn two reuses turn one's prompt only when
// ik's checkpoint sits far enough before the end of the previous prompt. With the model's own
// template (a template kvgate cannot make prefix-stable): the previous reply then renders
// without the empty think block its generation prompt ended in, so the prompt changes a few
// tokens before the previous one ended (with kvgate's template it does not change at all:
// HybridPrefixE2eTest).
uint64_t second_turn_cached(const std::vector<std::string>& extra_args, uint64_t& first_prompt) {
  testing::EngineOptions eo{.fork = plan::Fork::kIk,
                            .spec = *gguf::synth_defaults("qwen35"),
                            .context = 8192,
                            .slots = 2,
                            .stable_template = false};
  eo.args.insert(eo.args.end(), extra_args.begin(), extra_args.end());
  auto engine = Engine::start(eo);
  GatewayOptions o;
  o.slots = 2;
  o.engine_fork = plan::Fork::kIk;
  Front front([&] { return engine->endpoint(); }, o);
  auto c = front.client();
  std::string text;
  for (int i = 0; i < 300; ++i) text += fmt::format("fact {} is noted. ", i);
  json messages = json::array({{{"role", "system"}, {"content", "You are terse."}}, {{"role", "user"}, {"content", text}}});
  json body = testing::plain_chat(messages, 8);
  body["chat_template_kwargs"] = {{"enable_thinking", false}};
  auto a = post_json(c, "/v1/chat/completions", body);
  EXPECT_EQ(a.status, 200) << a.raw;
  first_prompt = a.body["usage"]["prompt_tokens"].get<uint64_t>();
  messages.push_back(a.body["choices"][0]["message"]);
  messages.push_back({{"role", "user"}, {"content", "And the next one?"}});
  body["messages"] = messages;
  auto b = post_json(c, "/v1/chat/completions", body);
  EXPECT_EQ(b.status, 200) << b.raw;
  return b.body["usage"]["prompt_tokens_details"]["cached_tokens"].get<uint64_t>();
}

TEST(IkHybridE2eTest, CheckpointToleranceKeepsTheCache) {
  auto ik = testing::ik_server_under_test();
  if (!ik) GTEST_SKIP() << testing::kIkAbsent;
  auto probed = engine::probe_server(*ik);
  ASSERT_TRUE(probed.ok()) << probed.error().message();
  plan::ServerSettings s;
  plan::choose_fork_settings(probed->caps, /*recurrent=*/true, s);
  ASSERT_TRUE(s.ctx_checkpoint_tolerance);
  uint64_t prompt_default = 0;
  uint64_t prompt_chosen = 0;
  const uint64_t cached_default = second_turn_cached({}, prompt_default);
  const uint64_t cached_chosen =
      second_turn_cached({"-ctx-ckpt-t", std::to_string(*s.ctx_checkpoint_tolerance)}, prompt_chosen);
  std::printf("hybrid qwen35 on ik, turn 2 cached of turn 1's %llu prompt tokens: -ctx-ckpt-t %u (ik default) %llu, "
              "-ctx-ckpt-t %u (kvgate) %llu\n",
              static_cast<unsigned long long>(prompt_chosen), plan::kIkDefaultCheckpointTolerance,
              static_cast<unsigned long long>(cached_default), *s.ctx_checkpoint_tolerance,
              static_cast<unsigned long long>(cached_chosen));
  EXPECT_GE(cached_chosen * 10, prompt_chosen * 9) << "kvgate's tolerance should keep the first turn cached";
  EXPECT_LT(cached_default, cached_chosen);
}

}  // namespace
}  // namespace kvgate::gateway
