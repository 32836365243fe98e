// A long prefill keeps every API's stream alive: keep-alives, in a form the API's clients
// accept, go out at the configured interval before the engine's first token — SSE comments
// on chat completions and Responses, `ping` events on Anthropic Messages. On the real engine,
// with a prompt whose prefill spans several (short) intervals.
#include <chrono>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "http/sse.h"
#include "testing/gateway_e2e.h"

namespace kvgate::gateway {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using testing::Engine;
using testing::Front;

constexpr auto kInterval = 50ms;

class StreamKeepaliveE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { engine_ = Engine::start({.context = 8192, .slots = 1}).release(); }
  static void TearDownTestSuite() {
    delete engine_;
    engine_ = nullptr;
  }
  // About 3,000 tokens no cache holds (`tag` makes it new).
  static std::string long_text(const std::string& tag) {
    std::string text = tag + ":";
    for (int i = 0; i < 1000; ++i) text += fmt::format(" {}{}", tag, i);
    return text;
  }
  struct Stream {
    int keepalives = 0;  // before the first event of the answer proper
    bool answered = false;
    double seconds = 0;
    std::string raw;
  };
  // Posts a streamed request and counts the keep-alives before `is_answer` holds for an event.
  static Stream post(const std::string& path, const json& body,
                     const std::function<bool(const http::SseEvent&)>& is_answer,
                     const std::function<bool(const http::SseEvent&)>& is_keepalive) {
    GatewayOptions o;
    o.keepalive = kInterval;
    o.stream_head_grace = 50ms;
    Front front([] { return engine_->endpoint(); }, o);
    auto c = front.client();
    c.set_read_timeout(std::chrono::seconds(300));
    Stream s;
    const auto t0 = std::chrono::steady_clock::now();
    auto res = c.Post(path, {{"anthropic-version", "2023-06-01"}}, body.dump(), "application/json");
    s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!res || res->status != 200) {
      ADD_FAILURE() << path << ": " << (res ? res->body : std::string("no answer"));
      return s;
    }
    s.raw = res->body;
    for (const auto& ev : http::SseParser().feed(res->body)) {
      if (is_answer(ev)) {
        s.answered = true;
        break;
      }
      if (is_keepalive(ev)) ++s.keepalives;
    }
    return s;
  }
  static void expect_kept_alive(const Stream& s, const std::string& api) {
    EXPECT_TRUE(s.answered) << api << ": " << s.raw.substr(0, 2000);
    // The prefill and the first token took several intervals; keep-alives filled them.
    EXPECT_GE(s.keepalives, 3) << api << " (" << s.seconds << " s): " << s.raw.substr(0, 2000);
    std::printf("%s: %d keep-alives before the first token, %.2f s in all\n", api.c_str(), s.keepalives,
                s.seconds);
  }
  static Engine* engine_;
};
Engine* StreamKeepaliveE2eTest::engine_ = nullptr;

bool comment(const http::SseEvent& ev) { return ev.comment_only; }
std::string type_of(const http::SseEvent& ev) {
  if (ev.comment_only || ev.is_done()) return "";
  const json j = json::parse(ev.data, nullptr, false);
  return j.is_object() ? j.value("type", "") : "";
}

TEST_F(StreamKeepaliveE2eTest, ChatCompletionsSendsCommentsDuringThePrefill) {
  const json body = {{"messages", json::array({{{"role", "user"}, {"content", long_text("chat")}}})},
                     {"max_tokens", 2},
                     {"stream", true}};
  const Stream s = post(
      "/v1/chat/completions", body, [](const http::SseEvent& ev) { return !ev.comment_only; }, comment);
  expect_kept_alive(s, "chat completions");
}

TEST_F(StreamKeepaliveE2eTest, MessagesSendsPingEventsDuringThePrefill) {
  const json body = {{"model", "any"},
                     {"max_tokens", 2},
                     {"stream", true},
                     {"messages", json::array({{{"role", "user"}, {"content", long_text("messages")}}})}};
  const Stream s = post(
      "/v1/messages", body, [](const http::SseEvent& ev) { return type_of(ev).starts_with("content_block"); },
      [](const http::SseEvent& ev) { return type_of(ev) == "ping"; });
  expect_kept_alive(s, "Anthropic messages");
}

TEST_F(StreamKeepaliveE2eTest, ResponsesSendsCommentsDuringThePrefill) {
  const json body = {{"input", long_text("responses")}, {"max_output_tokens", 16}, {"stream", true}};
  const Stream s = post(
      "/v1/responses", body,
      [](const http::SseEvent& ev) {
        const std::string t = type_of(ev);
        return !t.empty() && t != "response.created" && t != "response.in_progress";
      },
      comment);
  expect_kept_alive(s, "Responses");
}

}  // namespace
}  // namespace kvgate::gateway
