// Compaction on the real engine: a conversation that outgrows a small context keeps going,
// compactions show in metrics and session history, the engine-written summary reuses the
// cached prompt, overflow answers are retried transparently, and sessions survive a
// restart of the gateway.
#include <gtest/gtest.h>

#include <unistd.h>

#include <fmt/format.h>

#include "testing/fork_param.h"
#include "testing/gateway_e2e.h"

namespace kvgate::gateway {
namespace {

using nlohmann::json;
using testing::Engine;
using testing::Front;
using testing::post_json;

class CompactionE2eTest : public testing::EngineSuite<CompactionE2eTest> {
 public:
  static testing::EngineOptions engine_options() { return {.context = 4096, .slots = 1}; }

 protected:
  static std::string tool_output(int i, size_t words) {
    std::string out = fmt::format("$ cat src/module{}.cc\n", i);
    for (size_t w = 0; w < words; ++w) out += fmt::format("line {} value {} ok\n", w, (w * 7 + static_cast<size_t>(i)) % 97);
    return out;
  }

  // One agent turn: the assistant calls a tool, the tool answers, the user asks again.
  static void add_turn(json& messages, int i, size_t words) {
    const std::string id = fmt::format("call_{}", i);
    messages.push_back({{"role", "assistant"},
                        {"content", fmt::format("Reading module {}.", i)},
                        {"tool_calls", json::array({{{"id", id}, {"type", "function"},
                                                     {"function", {{"name", "read_file"},
                                                                   {"arguments", fmt::format("{{\"path\":\"src/module{}.cc\"}}", i)}}}}})}});
    messages.push_back({{"role", "tool"}, {"tool_call_id", id}, {"content", tool_output(i, words)}});
    messages.push_back({{"role", "user"}, {"content", fmt::format("Now check module {}.", i + 1)}});
  }

  static json request(const json& messages) {
    return testing::plain_chat(messages, 8);
  }
};
KVGATE_BOTH_ENGINES(CompactionE2eTest);

json base_conversation() {
  return json::array({{{"role", "system"}, {"content", "You are a coding agent. Be brief."}},
                      {{"role", "user"}, {"content", "Please review the modules one by one."}}});
}

TEST_P(CompactionE2eTest, LongConversationKeepsWorkingAndMostlyCached) {
  GatewayOptions o;
  o.compaction_options.summary_max_tokens = 96;
  Front front([] { return engine_->endpoint(); }, with_fork(o));
  auto c = front.client();
  json messages = base_conversation();
  uint64_t prompt_total = 0, cached_total = 0;
  for (int i = 0; i < 24; ++i) {
    auto a = post_json(c, "/v1/chat/completions", request(messages));
    ASSERT_EQ(a.status, 200) << "turn " << i << ": " << a.raw;
    if (i > 0) {
      prompt_total += a.body["usage"]["prompt_tokens"].get<uint64_t>();
      cached_total += a.body["usage"]["prompt_tokens_details"]["cached_tokens"].get<uint64_t>();
    }
    // The engine's context is 4096 tokens; the client's history grows far past it.
    EXPECT_LT(a.body["usage"]["prompt_tokens"].get<uint64_t>(), 4096U);
    add_turn(messages, i, 30);
  }
  auto sessions = json::parse(c.Get("/kvgate/v1/sessions")->body)["data"];
  ASSERT_EQ(sessions.size(), 1U);
  const json& s = sessions[0];
  EXPECT_EQ(s["requests"], 24);
  EXPECT_EQ(s["errors"], 0);
  ASSERT_GE(s["compaction_history"].size(), 1U) << s.dump(2);
  const json& ev = s["compaction_history"][0];
  EXPECT_EQ(ev["trigger"], "watermark");
  EXPECT_GT(ev["tokens_before"].get<uint64_t>(), ev["tokens_after"].get<uint64_t>());
  // The summary was asked as a continuation of the cached prompt: it reused its cache.
  if (ev.contains("summary_request")) {
    const json& sr = ev["summary_request"];
    EXPECT_GE(sr["cached_tokens"].get<double>(), 0.95 * sr["prompt_tokens"].get<double>()) << sr.dump();
  } else {
    ADD_FAILURE() << "no model summary was requested: " << ev.dump();
  }
  auto metrics = c.Get("/metrics")->body;
  EXPECT_NE(metrics.find("kvgate_compactions_total{level=\"L2\",trigger=\"watermark\"}"), std::string::npos) << metrics;
  std::printf("24 turns: %llu prompt tokens, %llu cached (%.1f%%), %zu compactions\n",
              static_cast<unsigned long long>(prompt_total), static_cast<unsigned long long>(cached_total),
              100.0 * static_cast<double>(cached_total) / static_cast<double>(prompt_total), s["compaction_history"].size());
  EXPECT_GT(static_cast<double>(cached_total) / static_cast<double>(prompt_total), 0.6);
}

TEST_P(CompactionE2eTest, OverflowIsRetriedWithAStrongerCompaction) {
  GatewayOptions o;
  o.high_watermark_tokens = 1000000;  // deliberately wrong: kvgate thinks everything fits
  o.compaction_options.summary_max_tokens = 64;
  Front front([] { return engine_->endpoint(); }, with_fork(o));
  auto c = front.client();
  json messages = base_conversation();
  for (int i = 0; i < 12; ++i) add_turn(messages, i, 40);  // well over 4096 tokens
  auto a = post_json(c, "/v1/chat/completions", request(messages));
  ASSERT_EQ(a.status, 200) << a.raw;
  auto metrics = c.Get("/metrics")->body;
  EXPECT_NE(metrics.find("kvgate_overflow_retries_total"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("trigger=\"overflow\""), std::string::npos);
}

TEST_P(CompactionE2eTest, AFirstRequestOfThreeContextsIsSummarisedByTheModelWithinTheContext) {
  // A client pastes a long history: the view is three times the engine's context, so the
  // summary cannot be asked over all of it (that request would overflow, as a 18,359-token
  // one did on a 16K engine); the model summarises the last turns that fit, the older ones
  // given to it as their extractive summary.
  GatewayOptions o;
  o.compaction_options.summary_max_tokens = 64;
  Front front([] { return engine_->endpoint(); }, with_fork(o));
  auto c = front.client();
  json messages = base_conversation();
  for (int i = 0; i < 40; ++i) add_turn(messages, i, 40);
  auto a = post_json(c, "/v1/chat/completions", request(messages));
  ASSERT_EQ(a.status, 200) << a.raw;
  auto sessions = json::parse(c.Get("/kvgate/v1/sessions")->body)["data"];
  ASSERT_EQ(sessions.size(), 1U);
  ASSERT_GE(sessions[0]["compaction_history"].size(), 1U) << sessions.dump(2);
  const json& ev = sessions[0]["compaction_history"][0];
  EXPECT_GT(ev["tokens_before"].get<uint64_t>(), 3U * 4096U) << ev.dump();
  EXPECT_LT(ev["tokens_after"].get<uint64_t>(), 4096U) << ev.dump();
  EXPECT_EQ(ev.value("summary_source", ""), "model") << ev.dump();
  EXPECT_FALSE(ev.contains("summary_error")) << ev.dump();
  EXPECT_GT(ev.value("summary_view_from", 0), 0) << ev.dump();
  ASSERT_TRUE(ev.contains("summary_request")) << ev.dump();
  EXPECT_LT(ev["summary_request"].value("prompt_tokens", 0), 4096) << ev.dump();
}

TEST_P(CompactionE2eTest, ASingleMessageThatCannotFitIsExplained) {
  Front front([] { return engine_->endpoint(); }, with_fork());
  auto c = front.client();
  json messages = base_conversation();
  std::string huge;
  for (int i = 0; i < 3000; ++i) huge += fmt::format("word{} ", i);
  messages.push_back({{"role", "user"}, {"content", huge}});
  auto a = post_json(c, "/v1/chat/completions", request(messages));
  EXPECT_EQ(a.status, 400) << a.raw;
  EXPECT_EQ(a.body["error"]["code"], "context_length_exceeded") << a.raw;
  EXPECT_NE(a.body["error"]["message"].get<std::string>().find("newest user message"), std::string::npos) << a.raw;
}

TEST_P(CompactionE2eTest, SessionsSurviveAGatewayRestart) {
  const auto db = std::filesystem::temp_directory_path() / fmt::format("kvgate_restart_{}.db", ::getpid());
  std::filesystem::remove(db);
  json messages = base_conversation();
  uint64_t last_prompt = 0;
  std::string id;
  {
    Front front([] { return engine_->endpoint(); }, with_fork());
    ASSERT_TRUE(front.gateway().open_store(db).ok());
    auto c = front.client();
    for (int i = 0; i < 3; ++i) {
      auto a = post_json(c, "/v1/chat/completions", request(messages));
      ASSERT_EQ(a.status, 200) << a.raw;
      last_prompt = a.body["usage"]["prompt_tokens"];
      messages.push_back(a.body["choices"][0]["message"]);
      messages.push_back({{"role", "user"}, {"content", fmt::format("and then {}?", i)}});
    }
    id = json::parse(c.Get("/kvgate/v1/sessions")->body)["data"][0]["id"];
  }  // the gateway goes away without any shutdown step (state was saved every turn)
  Front front([] { return engine_->endpoint(); }, with_fork());
  ASSERT_TRUE(front.gateway().open_store(db).ok());
  auto c = front.client();
  auto a = post_json(c, "/v1/chat/completions", request(messages));
  ASSERT_EQ(a.status, 200) << a.raw;
  // The same session, and the engine reused everything it had for it.
  auto s = json::parse(c.Get("/kvgate/v1/sessions/" + id)->body);
  EXPECT_EQ(s["id"], id) << s.dump();
  EXPECT_EQ(s["requests"], 4);
  EXPECT_GE(a.body["usage"]["prompt_tokens_details"]["cached_tokens"].get<uint64_t>() + 8, last_prompt);
  std::filesystem::remove(db);
}

TEST_P(CompactionE2eTest, ManualCompaction) {
  Front front([] { return engine_->endpoint(); }, with_fork());
  auto c = front.client();
  json messages = base_conversation();
  for (int i = 0; i < 4; ++i) add_turn(messages, i, 20);
  ASSERT_EQ(post_json(c, "/v1/chat/completions", request(messages)).status, 200);
  const std::string id = json::parse(c.Get("/kvgate/v1/sessions")->body)["data"][0]["id"];
  auto r = post_json(c, "/kvgate/v1/sessions/" + id + "/compact", {{"target_tokens", 300}});
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["trigger"], "manual") << r.raw;
  std::printf("manual compaction: %s\n", r.raw.c_str());
  EXPECT_LE(r.body["tokens_after"].get<uint64_t>(), 300U);
  // The summary is asked as a continuation of the cached conversation: the engine reports most
  // of its prompt served from cache (mainline: timings.cache_n; ik: tokens_evaluated − prompt_n).
  if (r.body["summary_source"] == "model") {
    const json& sr = r.body["summary_request"];
    EXPECT_GT(sr.value("cached_tokens", 0), sr.value("prompt_tokens", 0) / 2) << r.raw;
  }
  auto missing = post_json(c, "/kvgate/v1/sessions/nope/compact", json::object());
  EXPECT_EQ(missing.status, 404);
  // The next turn continues on the compacted view.
  messages.push_back({{"role", "user"}, {"content", "continue"}});
  auto next = post_json(c, "/v1/chat/completions", request(messages));
  ASSERT_EQ(next.status, 200) << next.raw;
  EXPECT_LT(next.body["usage"]["prompt_tokens"].get<uint64_t>(), 700U);
}

}  // namespace
}  // namespace kvgate::gateway

namespace kvgate::gateway {
namespace {

// On an engine that shifts cached chunks (mainline --cache-reuse), the summary goes after
// the retained messages, which then keep their cached KV through a compaction.
TEST(CompactionShiftE2eTest, RetainedMessagesStayCachedThroughACompaction) {
  auto engine = testing::Engine::start({.context = 4096, .slots = 1, .args = {"--cache-reuse", "64"}});
  GatewayOptions o;
  o.compaction_options.summary_max_tokens = 64;
  o.compaction_options.summary_after_tail = true;
  testing::Front front([&] { return engine->endpoint(); }, o);
  auto c = front.client();
  json messages = json::array({{{"role", "system"}, {"content", "You are a coding agent. Be brief."}},
                               {{"role", "user"}, {"content", "Please review the modules one by one."}}});
  uint64_t compacted_prompt = 0, compacted_cached = 0;
  size_t compactions_seen = 0;
  for (int i = 0; i < 24 && compactions_seen == 0; ++i) {
    auto a = testing::post_json(c, "/v1/chat/completions", testing::plain_chat(messages, 8));
    ASSERT_EQ(a.status, 200) << "turn " << i << ": " << a.raw;
    auto s = json::parse(c.Get("/kvgate/v1/sessions")->body)["data"][0];
    if (s["compaction_history"].size() > compactions_seen) {
      compactions_seen = s["compaction_history"].size();
      compacted_prompt = a.body["usage"]["prompt_tokens"];
      compacted_cached = a.body["usage"]["prompt_tokens_details"]["cached_tokens"];
    }
    const std::string id = fmt::format("call_{}", i);
    messages.push_back({{"role", "assistant"}, {"content", fmt::format("Reading module {}.", i)},
                        {"tool_calls", json::array({{{"id", id}, {"type", "function"},
                                                     {"function", {{"name", "read_file"}, {"arguments", "{}"}}}}})}});
    std::string out;
    for (int w = 0; w < 30; ++w) out += fmt::format("line {} value {} ok\n", w, (w * 7 + i) % 97);
    messages.push_back({{"role", "tool"}, {"tool_call_id", id}, {"content", out}});
    messages.push_back({{"role", "user"}, {"content", fmt::format("Now check module {}.", i + 1)}});
  }
  ASSERT_GT(compactions_seen, 0U) << "no compaction happened";
  std::printf("compacted turn: %llu prompt tokens, %llu reused from the cache\n",
              static_cast<unsigned long long>(compacted_prompt), static_cast<unsigned long long>(compacted_cached));
  // The system message and the retained messages (well over half of the compacted prompt)
  // are reused; without shifting only the system message would be.
  EXPECT_GT(compacted_cached * 2, compacted_prompt);
}

}  // namespace
}  // namespace kvgate::gateway
