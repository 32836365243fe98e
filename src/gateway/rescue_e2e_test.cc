// End to end against the real pinned llama-server with the chatml-tools template:
//   * every recorded history fault the engine rejects is rejected again straight to the
//     engine, and accepted once repaired, on that turn and on a later turn too;
//   * outputs the engine's own parser rejects (random weights, tools declared) are
//     recovered as raw text by replaying the rendered prompt as a streamed /completion
//     with the same seed, and become a valid assistant message.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "upstream/rescue_replay.h"
#include "rescue/history_repair.h"
#include "rescue/relaxed_json.h"
#include "rescue/tool_call_parse.h"
#include "testing/gateway_e2e.h"
#include "testing/paths.h"

namespace kvgate::gateway {

using rescue::RepairedHistory;
using rescue::dump_json;
using rescue::is_valid_utf8;
using rescue::parse_tool_calls;
using rescue::repair_history;

namespace {

using nlohmann::json;
using testing::Engine;
namespace fs = std::filesystem;

const fs::path kSource(kvgate::testing::source_dir());

class RescueE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string tmpl = (kSource / "src" / "gateway" / "templates" / "chatml-tools.jinja").string();
    engine_ = Engine::start({.context = 4096, .slots = 1, .args = {"--jinja", "--chat-template-file", tmpl}})
                  .release();
  }
  static void TearDownTestSuite() {
    delete engine_;
    engine_ = nullptr;
  }
  static httplib::Client client() {
    httplib::Client c(engine_->endpoint().host, engine_->endpoint().port);
    c.set_bearer_token_auth(engine_->api_key());
    c.set_read_timeout(std::chrono::seconds(120));
    return c;
  }
  static testing::JsonAnswer chat(const json& body) {
    auto c = client();
    return testing::post_json(c, "/v1/chat/completions", body);
  }
  static Engine* engine_;
};
Engine* RescueE2eTest::engine_ = nullptr;

std::vector<json> history_fixtures() {
  std::vector<fs::path> paths;
  for (const auto& e : fs::directory_iterator(kSource / "tests" / "fixtures" / "history_faults")) {
    if (e.path().extension() == ".json") paths.push_back(e.path());
  }
  std::sort(paths.begin(), paths.end());
  std::vector<json> out;
  for (const auto& p : paths) {
    std::ifstream in(p);
    out.push_back(json::parse(in, nullptr, false));
  }
  return out;
}

// An engine message up to the request JSON it quotes (whose key order depends on the client).
std::string head(const std::string& message) { return message.substr(0, message.find_first_of("{[\"")); }

json with_history(json request, const RepairedHistory& h) {
  request["messages"] = h.messages;
  if (request.contains("tools")) request["tools"] = h.tools;
  return request;
}

TEST_F(RescueE2eTest, RejectedHistoriesAreAcceptedOnceRepairedOnEveryLaterTurn) {
  int checked = 0;
  for (const json& f : history_fixtures()) {
    const std::string name = f.value("fault", "");
    const json recorded = f["engine"].value("chatml-tools", json());
    json request = f["request"];
    auto repaired = repair_history(request["messages"], request.value("tools", json()));
    if (recorded.value("status", 200) == 200 || !repaired.changed()) continue;
    SCOPED_TRACE(name);
    ++checked;

    // Straight to the engine: rejected as recorded.
    auto raw = chat(request);
    EXPECT_EQ(raw.status, recorded["status"].get<int>()) << raw.raw;
    EXPECT_EQ(head(raw.body["error"].value("message", "")), head(recorded["body"]["error"].value("message", "")));
    // Repaired: accepted.
    auto fixed = chat(with_history(request, repaired));
    EXPECT_EQ(fixed.status, 200) << fixed.raw;

    // A later turn of the same conversation: the fault is still in the history.
    json later = request;
    later["messages"].push_back({{"role", "assistant"}, {"content", "Noted."}});
    later["messages"].push_back({{"role", "user"}, {"content", "Anything else?"}});
    EXPECT_NE(chat(later).status, 200);
    auto later_repaired = repair_history(later["messages"], later.value("tools", json()));
    EXPECT_EQ(chat(with_history(later, later_repaired)).status, 200);
    // The repaired prefix is the same on both turns (the prompt prefix stays stable).
    for (size_t i = 0; i < repaired.messages.size(); ++i) {
      EXPECT_EQ(dump_json(repaired.messages[i]), dump_json(later_repaired.messages[i])) << i;
    }
  }
  EXPECT_GE(checked, 20);
}

// Streams a /completion and collects its text until it ends or fails.
ReplayText stream_completion(httplib::Client& c, const json& body) {
  ReplayText replay;
  auto res = c.Post("/completion", httplib::Headers{}, body.dump(), "application/json");
  if (!res) return replay;
  const std::string& s = res->body;
  for (size_t pos = 0; (pos = s.find("data: ", pos)) != std::string::npos;) {
    size_t end = s.find("\n\n", pos);
    if (end == std::string::npos) end = s.size();
    replay.add_event(std::string_view(s).substr(pos + 6, end - pos - 6));
    pos = end;
  }
  return replay;
}

TEST_F(RescueE2eTest, OutputsTheEngineRejectsAreRecoveredAndParsed) {
  const json tools = json::parse(R"([{"type": "function", "function": {"name": "get_weather",
    "description": "Current weather for a city", "parameters": {"type": "object",
    "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])");
  const json messages = json::parse(R"([{"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "What is the weather in Rome?"}])");
  int rejected = 0, recovered = 0;
  auto c = client();
  for (int seed = 1; seed <= 12; ++seed) {
    json request = {{"messages", messages}, {"tools", tools}, {"seed", seed}, {"max_tokens", 32}};
    auto answer = chat(request);
    if (answer.status == 200) continue;
    ASSERT_TRUE(is_output_parse_error(answer.status, answer.body["error"]["message"].get<std::string>()))
        << answer.raw;
    ++rejected;
    // The same rendered prompt as a raw completion with the same seed and length.
    auto rendered = testing::post_json(c, "/apply-template", request);
    ASSERT_EQ(rendered.status, 200);
    ReplayText raw = stream_completion(c, replay_completion_body(request, rendered.body["prompt"]));
    ASSERT_FALSE(raw.text().empty());
    auto rescued = parse_tool_calls(raw.text(), tools);
    const json& msg = rescued.message;
    EXPECT_EQ(msg["role"], "assistant");
    EXPECT_TRUE(msg["content"].is_string() || rescued.call_count() > 0);
    EXPECT_TRUE(is_valid_utf8(dump_json(msg)));
    ++recovered;
  }
  EXPECT_GE(rejected, 2) << "the engine accepted every random output; the test shows nothing";
  EXPECT_EQ(recovered, rejected);
}

}  // namespace
}  // namespace kvgate::gateway
