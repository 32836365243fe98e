// A long conversation in each of the three APIs, past three times the slot's context, on the
// real engine: no turn fails and none gets a context error, kvgate compacts (visible in its
// metrics), and the engine computes a fraction of what it is sent (prefilled ÷ prompt,
// printed like the chat replays'). Chat completions and Anthropic Messages resend the whole
// history each turn, as their clients do; Responses continues by previous_response_id, so the
// history grows in kvgate's store.
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>

#include <fmt/format.h>

#include "testing/gateway_e2e.h"

namespace kvgate::gateway {
namespace {

using nlohmann::json;

constexpr uint64_t kContext = 4096;

// About `words` words of plain English, different for every turn.
std::string filler(int turn, int words) {
  static const char* kWords[] = {"river", "stone", "garden", "window", "paper", "engine", "valley", "silver",
                                 "market", "candle", "harbor", "forest", "letter", "bridge", "winter", "orange",
                                 "pocket", "ladder", "circle", "thunder", "meadow", "basket", "mirror", "planet"};
  std::string out = fmt::format("Note {}:", turn);
  uint32_t x = 2654435761U * static_cast<uint32_t>(turn + 1);
  for (int i = 0; i < words; ++i) {
    x = x * 1664525U + 1013904223U;
    out += ' ';
    out += kWords[(x >> 16) % std::size(kWords)];
  }
  return out + ". Reply briefly.";
}

struct Api {
  const char* name;
  const char* path;
  // The next request from the history so far (alternating user / assistant texts) and the
  // id of the last answer; and the assistant's text and id of an answer.
  std::function<json(const std::vector<std::string>& history, const std::string& last_id)> request;
  std::function<std::pair<std::string, std::string>(const json& answer)> reply;
};

json chat_messages(const std::vector<std::string>& history) {
  json m = json::array();
  for (size_t i = 0; i < history.size(); ++i) m.push_back({{"role", i % 2 ? "assistant" : "user"}, {"content", history[i]}});
  return m;
}

std::vector<Api> apis() {
  return {
      {"chat", "/v1/chat/completions",
       [](const auto& h, const auto&) {
         json m = chat_messages(h);
         m.insert(m.begin(), json{{"role", "system"}, {"content", "You keep notes."}});
         return json{{"messages", m}, {"max_tokens", 8}};
       },
       [](const json& a) { return std::pair{a["choices"][0]["message"].value("content", ""), std::string()}; }},
      {"messages", "/v1/messages",
       [](const auto& h, const auto&) {
         return json{{"model", "m"}, {"system", "You keep notes."}, {"messages", chat_messages(h)}, {"max_tokens", 8}};
       },
       [](const json& a) {
         std::string text;
         for (const auto& b : a["content"]) text += b.value("text", "");
         return std::pair{text, std::string()};
       }},
      {"responses", "/v1/responses",
       [](const auto& h, const auto& last_id) {
         json r = {{"model", "m"}, {"instructions", "You keep notes."}, {"input", h.back()}, {"max_output_tokens", 16}};
         if (!last_id.empty()) r["previous_response_id"] = last_id;
         return r;
       },
       [](const json& a) {
         std::string text;
         for (const auto& item : a["output"]) {
           if (item.value("type", "") != "message") continue;
           for (const auto& part : item["content"]) text += part.value("text", "");
         }
         return std::pair{text, a.value("id", "")};
       }},
  };
}

class WireLongE2eTest : public ::testing::TestWithParam<size_t> {
 protected:
  static void SetUpTestSuite() {
    json bias = testing::Engine::start({.context = 2048})->word_bias();
    engine_ = testing::Engine::start({.context = kContext, .slots = 1, .args = testing::word_bias_flags(bias)}).release();
  }
  static void TearDownTestSuite() { delete engine_; }
  static testing::Engine* engine_;
};
testing::Engine* WireLongE2eTest::engine_ = nullptr;

TEST_P(WireLongE2eTest, PastThreeContextsWithoutAContextError) {
  const Api api = apis()[GetParam()];
  // Short model summaries: the random model writes words until the limit, and the test is
  // about every API reaching compaction, not about the summaries (512 tokens each took up to
  // 160 s on two loaded cores).
  GatewayOptions options;
  options.compaction_options.summary_max_tokens = 64;
  testing::Front front([] { return engine_->endpoint(); }, options);
  auto client = front.client();
  std::vector<std::string> history;
  std::string last_id;
  std::string last_raw;  // the previous answer, for a failure's message
  uint64_t words_sent = 0;
  int turns = 0;
  for (; words_sent < 3 * kContext; ++turns) {
    history.push_back(filler(turns, 240));
    words_sent += 240;
    const json body = api.request(history, last_id);
    auto a = testing::post_json(client, api.path, body);
    ASSERT_EQ(a.status, 200) << api.name << " turn " << turns << ": " << a.raw.substr(0, 600)
                             << "\nthe turn before answered: " << last_raw.substr(0, 1500);
    last_raw = a.raw;
    auto [text, id] = api.reply(a.body);
    history.push_back(text.empty() ? "ok" : text);
    words_sent += 8;
    last_id = id;
  }
  const json m = front.gateway().metrics().to_json();
  double compactions = 0;
  for (const auto& [name, v] : m["counters"].items()) {
    if (name.rfind("compactions_total", 0) == 0) compactions += v.get<double>();
  }
  EXPECT_GT(compactions, 0) << m.dump();
  EXPECT_EQ(m["errors"].size(), 0U) << m["errors"].dump();
  const double prompt = m["prompt_tokens"].get<double>(), prefilled = m["prefilled_tokens"].get<double>();
  ASSERT_GT(prompt, 0);
  std::printf("[ %s ] %d turns, ~%llu words of conversation (%.1f contexts), %.0f compactions, prefilled %.0f of "
              "%.0f prompt tokens (%.3f)\n",
              api.name, turns, static_cast<unsigned long long>(words_sent), static_cast<double>(words_sent) / kContext,
              compactions, prefilled, prompt, prefilled / prompt);
  // The arithmetic bound (docs/GATEWAY.md, Compaction): with g tokens added per turn, the high
  // watermark H and the low L, a compaction every (H − L) / g turns prefills ~H per cycle while
  // the prompts average (H + L) / 2, so prefilled ÷ prompt ≈ 2·H·g / ((H − L)·(H + L)). Here
  // g ≈ 256 (the note's words, each a token, and the reply), H = 0.8·context, L = 0.55·H.
  const double h = 0.8 * kContext, l = 0.55 * h, g = 256;
  const double bound = 2 * h * g / ((h - l) * (h + l));
  std::printf("[ %s ] arithmetic bound %.3f\n", api.name, bound);
  EXPECT_LT(prefilled / prompt, 1.5 * bound);
}

INSTANTIATE_TEST_SUITE_P(ThreeApis, WireLongE2eTest, ::testing::Values(0, 1, 2),
                         [](const auto& p) { return std::string(apis()[p.param].name); });

}  // namespace
}  // namespace kvgate::gateway
