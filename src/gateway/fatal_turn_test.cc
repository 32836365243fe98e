// A chat turn whose request was with the engine when it was lost (scripted: the engine cannot
// be made to die on cue in a unit test; the real supervisor's side is in upstream_faults_test).
#include <atomic>

#include <gtest/gtest.h>

#include "gateway/gateway.h"
#include "testing/scripted_upstream.h"

namespace kvgate::gateway {
namespace {

using nlohmann::json;
using testing::ScriptedUpstream;

// Loses the engine (a new generation on another port) while the chat completions whose
// bodies carry a `grammar` are with it.
class LosingUpstream : public ScriptedUpstream {
 public:
  Gateway* gateway = nullptr;
  bool hung = true;  // how the engine is lost: killed as a zombie, or died
  std::atomic<int> chat_calls{0};

  EngineEndpoint endpoint() override { return {.port = static_cast<uint16_t>(port_.load())}; }

 private:
  UpstreamResult<UpstreamResponse> answer(const Request& request) override {
    if (request.path == "/v1/chat/completions") {
      ++chat_calls;
      if (request.body.find("\"grammar\"") != std::string::npos) {
        ++port_;
        gateway->on_engine_restart(hung);
        return UpstreamError{.kind = UpstreamFailure::kBroken, .message = "connection reset"};
      }
    }
    return ScriptedUpstream::answer(request);
  }

  std::atomic<int> port_{1};
};

class Output : public TurnOutput {
 public:
  int status = 0;
  std::string code;
  bool client_gone() override { return false; }
  void open_stream(CancelScope&) override {}
  bool begin_stream() override { return true; }
  bool engine_chunk(const json&, const std::string&) override { return true; }
  bool engine_error(const ApiError&, const std::string&) override { return true; }
  bool kvgate_chunk(const json&) override { return true; }
  void progress(std::string) override {}
  void end_stream(bool) override {}
  void answer(const json&, std::string_view) override { status = 200; }
  void fail(const ApiError& e) override {
    status = e.status;
    code = e.code.value_or("");
  }
};

GatewayOptions losing_options() {
  GatewayOptions options;
  options.context_tokens = 100000;
  options.model_summaries = false;
  options.wait_for_engine = std::chrono::seconds(5);
  return options;
}

// A chat the LosingUpstream loses its engine on (it carries a grammar).
const json kKiller = {{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})},
                      {"grammar", "root ::= \"x\""}};

TEST(FatalTurnTest, ARequestThatTookTheEngineDownIsNotSentAgainNorItsResends) {
  auto upstream = std::make_shared<LosingUpstream>();
  Gateway gateway(losing_options(), upstream);
  upstream->gateway = &gateway;
  const json& killer = kKiller;
  auto turn = [&](const json& body) {
    Output out;
    gateway.run_turn({.body = body, .scope = "open"}, out);
    return out;
  };

  const Output first = turn(killer);
  EXPECT_EQ(first.status, 502);
  EXPECT_EQ(first.code, "request_stopped_engine");
  EXPECT_EQ(upstream->chat_calls.load(), 1);  // not re-sent on the restarted engine

  const Output again = turn(killer);
  EXPECT_EQ(again.status, 400);
  EXPECT_EQ(again.code, "request_stopped_engine");
  EXPECT_EQ(upstream->chat_calls.load(), 1);  // refused before the engine

  json other = killer;
  other.erase("grammar");
  EXPECT_EQ(turn(other).status, 200);
  EXPECT_EQ(upstream->chat_calls.load(), 2);
}

TEST(FatalTurnTest, ARequestWhoseEngineDiedIsSentOnceMoreThenNoMore) {
  auto upstream = std::make_shared<LosingUpstream>();
  upstream->hung = false;  // crashed or killed from outside: maybe not the request's fault
  Gateway gateway(losing_options(), upstream);
  upstream->gateway = &gateway;
  const json& killer = kKiller;
  Output first;
  gateway.run_turn({.body = killer, .scope = "open"}, first);
  EXPECT_EQ(first.status, 502);
  EXPECT_EQ(first.code, "request_stopped_engine");
  EXPECT_EQ(upstream->chat_calls.load(), 2);  // re-sent once, lost the engine again
  Output again;
  gateway.run_turn({.body = killer, .scope = "open"}, again);
  EXPECT_EQ(again.status, 400);
  EXPECT_EQ(upstream->chat_calls.load(), 2);
}

}  // namespace
}  // namespace kvgate::gateway
