// Engine faults the real engine cannot be made to produce on demand, injected with a fake
// engine (fault_support.h) behind kvgate's real Gateway and HttpServer: garbage answers, a
// truncated event stream, a stall after the response head, and 5xx answers while /health and
// /slots are fine (with the real Supervisor, which must restart such an engine).
//
// For each: what the client sees (a well-formed OpenAI error or a completed answer, within
// the configured bound), that kvgate keeps serving (a good engine afterwards is served), and
// that a failed turn commits nothing to its session.
#include <atomic>
#include <optional>
#include <thread>

#include <gtest/gtest.h>

#include "engine/supervisor.h"
#include "testing/eventually.h"
#include "testing/fault_support.h"
#include "testing/gateway_e2e.h"

namespace kvgate::gateway {
namespace {

using nlohmann::json;
using testing::FakeConnection;
using testing::FakeEngine;
using testing::FakeRequest;
using testing::Front;
using testing::post_json;
using namespace std::chrono_literals;

json chat_body(const std::string& text) {
  return {{"messages", json::array({{{"role", "user"}, {"content", text}}})}, {"max_tokens", 8}};
}

GatewayOptions fake_options() {
  GatewayOptions o;
  o.count_tokens = false;  // the fake has no tokenizer
  o.context_tokens = 4096;
  o.model_summaries = false;
  o.keepalive = 300ms;
  o.stream_head_grace = 200ms;
  o.wait_for_engine = 3s;
  o.min_upstream_timeout = 2s;
  o.generation_timeout = 1s;
  return o;
}

// The error object of an OpenAI-format error answer, or null.
json error_of(const testing::JsonAnswer& a) {
  if (!a.body.is_object() || !a.body.contains("error") || !a.body["error"].is_object()) return nullptr;
  const json& e = a.body["error"];
  if (!e.contains("message") || !e["message"].is_string() || !e.contains("type")) return nullptr;
  return e;
}

// A fake engine whose chat answers are chosen per test; everything else behaves.
class Switchable {
 public:
  std::atomic<int> mode{0};
  std::function<void(const FakeRequest&, FakeConnection&)> fault;
  void handle(const FakeRequest& r, FakeConnection& c) {
    if (FakeEngine::answer_basics(r, c)) return;
    if (mode.load() == 1 && fault) return fault(r, c);
    FakeEngine::answer_chat(r, c);
  }
};

struct Tally {
  std::map<std::string, int> client;
  void add(const std::string& k) { ++client[k]; }
  json to_json() const { return client; }
};

TEST(UpstreamFaultsTest, GarbageAnswersBecomeOpenAiErrorsAndAreNeverRelayed) {
  Switchable s;
  s.mode = 1;
  FakeEngine engine([&](const FakeRequest& r, FakeConnection& c) { s.handle(r, c); });
  Front front([&] { return engine.endpoint(); }, fake_options());
  auto client = front.client();
  Tally tally;
  int faults = 0;

  // 1. A 200 whose body is not JSON.
  s.fault = [](const FakeRequest&, FakeConnection& c) {
    c.answer(200, "application/json", "\x01\xff<html>oops");
  };
  auto a = post_json(client, "/v1/chat/completions", chat_body("garbage one"));
  ++faults;
  EXPECT_EQ(a.status, 502) << a.raw;
  ASSERT_FALSE(error_of(a).is_null()) << a.raw;
  tally.add(std::to_string(a.status) + " " + error_of(a).value("code", ""));

  // 2. An event stream of garbage events, properly ended: nothing of it reaches the client.
  s.fault = [](const FakeRequest&, FakeConnection& c) {
    c.begin_chunked(200, "text/event-stream");
    c.chunk("data: <<<garbage>>>\n\n");
    c.chunk(std::string("data: \x00\xfe\xff\n\n", 10));
    c.chunk("event: nonsense\n\n");
    c.end_chunked();
  };
  auto st = testing::stream_request(front.port(), chat_body("garbage two"));
  ++faults;
  EXPECT_EQ(st.status, 200);
  EXPECT_EQ(st.body.find("garbage"), std::string::npos) << st.body;
  ASSERT_TRUE(st.error.has_value()) << st.body;
  EXPECT_NE(st.error->value("message", "").find("not JSON and were dropped"), std::string::npos) << st.body;
  EXPECT_FALSE(st.done);
  tally.add("200 + in-stream error");

  // 3. Not HTTP at all, then the connection closes: retried once, then a 502.
  s.fault = [](const FakeRequest&, FakeConnection& c) { c.write("SSH-2.0-OpenSSH_9.6\r\n\r\n"); };
  a = post_json(client, "/v1/chat/completions", chat_body("garbage three"));
  ++faults;
  EXPECT_EQ(a.status, 502) << a.raw;
  ASSERT_FALSE(error_of(a).is_null()) << a.raw;
  tally.add(std::to_string(a.status) + " " + error_of(a).value("code", ""));

  // 4. An endless line: not an event stream; kvgate stops reading it.
  s.fault = [](const FakeRequest&, FakeConnection& c) {
    c.begin_chunked(200, "text/event-stream");
    const std::string junk(1 << 20, 'x');
    for (int i = 0; i < 10 && !c.closed(); ++i) c.chunk(junk);
    c.stall();
  };
  st = testing::stream_request(front.port(), chat_body("garbage four"));
  ++faults;
  EXPECT_EQ(st.status, 200);
  ASSERT_TRUE(st.error.has_value()) << st.body.substr(0, 300);
  EXPECT_NE(st.error->value("message", "").find("not an event stream"), std::string::npos);
  EXPECT_LT(st.body.size(), 10000u);
  tally.add("200 + in-stream error");

  // kvgate keeps serving, and no failed turn became part of a session.
  s.mode = 0;
  a = post_json(client, "/v1/chat/completions", chat_body("a good one"));
  EXPECT_EQ(a.status, 200) << a.raw;
  size_t committed = 0;
  for (const auto& ss : front.gateway().sessions().list_all()) committed += ss->conversation.length;
  EXPECT_EQ(committed, 2u) << "only the good turn (request + reply) is committed";
  EXPECT_NE(front.gateway().metrics().prometheus().find("engine_bad_events_total"), std::string::npos);
  testing::record_reliability(
      "engine_garbage",
      {{"fault", "engine answers garbage: non-JSON 200, garbage SSE events, non-HTTP bytes, an endless line"},
       {"expected", "502 or an in-stream error (OpenAI format); garbage never relayed; kvgate keeps serving"},
       {"test", "UpstreamFaultsTest.GarbageAnswersBecomeOpenAiErrorsAndAreNeverRelayed"},
       {"faults", faults},
       {"client", tally.to_json()}});
}

TEST(UpstreamFaultsTest, TruncatedStreamEndsWithAnErrorAndCommitsNothing) {
  Switchable s;
  s.mode = 1;
  s.fault = [](const FakeRequest& r, FakeConnection& c) {
    const json body = json::parse(r.body);
    if (!body.value("stream", false)) {
      // A head announcing 1000 bytes, 20 sent, then the connection drops.
      c.write(
          "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
          "1000\r\n\r\n{\"id\":\"chatcmpl-x\",");
      c.abort();
      return;
    }
    c.begin_chunked(200, "text/event-stream");
    c.chunk(
        R"(data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"half"},"finish_reason":null}]})"
        "\n\n");
    c.chunk(
        R"(data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":" an"},"finish_reason":null}]})"
        "\n\n");
    c.write("1f\r\ndata: {\"id\":\"c\",\"obj");  // a chunk cut in the middle
    c.abort();
  };
  FakeEngine engine([&](const FakeRequest& r, FakeConnection& c) { s.handle(r, c); });
  Front front([&] { return engine.endpoint(); }, fake_options());
  auto client = front.client();
  Tally tally;
  const json messages =
      json::array({{{"role", "system"}, {"content", "sys"}}, {{"role", "user"}, {"content", "tell me"}}});
  json body = {{"messages", messages}, {"max_tokens", 8}};

  auto st = testing::stream_request(front.port(), body);
  EXPECT_EQ(st.status, 200);
  EXPECT_EQ(st.content, "half an");
  ASSERT_TRUE(st.error.has_value()) << st.body;
  EXPECT_EQ(st.error->value("code", ""), "upstream_error");
  EXPECT_FALSE(st.done);
  EXPECT_FALSE(st.transport_error) << "the client's stream is ended properly";
  tally.add("200 + partial content + in-stream error");

  auto a = post_json(client, "/v1/chat/completions", body);
  EXPECT_EQ(a.status, 502) << a.raw;
  ASSERT_FALSE(error_of(a).is_null());
  EXPECT_NE(error_of(a)["message"].get<std::string>().find("closed the connection"), std::string::npos)
      << a.raw;
  tally.add("502 upstream_error");

  // Nothing was committed: the same turn, now answered, is the session's first.
  s.mode = 0;
  a = post_json(client, "/v1/chat/completions", body);
  ASSERT_EQ(a.status, 200) << a.raw;
  auto sessions = front.gateway().sessions().list_all();
  ASSERT_EQ(sessions.size(), 1u);
  EXPECT_EQ(sessions[0]->conversation.length, 3u);  // system, user, the one reply
  EXPECT_EQ(sessions[0]->counters.errors, 0u) << "the failed attempts left no session behind";
  testing::record_reliability(
      "engine_truncated_sse",
      {{"fault", "engine stream cut mid-event (stream) / body cut after the head (non-stream)"},
       {"expected", "relayed part + in-stream error, or 502; the turn is not committed; the retry is served"},
       {"test", "UpstreamFaultsTest.TruncatedStreamEndsWithAnErrorAndCommitsNothing"},
       {"faults", 2},
       {"client", tally.to_json()}});
}

TEST(UpstreamFaultsTest, StallAfterHeadersIsBoundedByTheUpstreamTimeout) {
  Switchable s;
  s.mode = 1;
  s.fault = [](const FakeRequest&, FakeConnection& c) {
    c.begin_chunked(200, "text/event-stream");
    c.stall();
  };
  FakeEngine engine([&](const FakeRequest& r, FakeConnection& c) { s.handle(r, c); });
  GatewayOptions o = fake_options();  // upstream time-out 2 s, + 1 s for a whole answer
  Front front([&] { return engine.endpoint(); }, o);
  auto client = front.client();
  Tally tally;

  auto st = testing::stream_request(front.port(), chat_body("stall"));
  EXPECT_EQ(st.status, 200);
  ASSERT_TRUE(st.error.has_value()) << st.body;
  EXPECT_EQ(st.error->value("code", ""), "upstream_timeout");
  EXPECT_GE(st.ms, 1900);
  EXPECT_LT(st.ms, 5000) << "bound: --upstream-timeout 2 s";
  EXPECT_GE(st.comments.size(), 3u) << "keep-alives while the engine is silent";
  tally.add("200 + keep-alives + in-stream 504");

  const auto t0 = std::chrono::steady_clock::now();
  auto a = post_json(client, "/v1/chat/completions", chat_body("stall two"));
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(a.status, 504) << a.raw;
  ASSERT_FALSE(error_of(a).is_null());
  EXPECT_GE(ms, 2900);
  EXPECT_LT(ms, 6000) << "bound: upstream 2 s + generation 1 s";
  tally.add("504 upstream_timeout");

  s.mode = 0;
  EXPECT_EQ(post_json(client, "/v1/chat/completions", chat_body("fine")).status, 200);
  testing::record_reliability(
      "engine_stall_after_headers",
      {{"fault", "engine sends the response head, then nothing"},
       {"expected",
        "stream: keep-alives, then an in-stream 504 after --upstream-timeout; non-stream: 504 after "
        "--upstream-timeout + --generation-timeout"},
       {"test", "UpstreamFaultsTest.StallAfterHeadersIsBoundedByTheUpstreamTimeout"},
       {"faults", 2},
       {"client", tally.to_json()},
       {"bound_ms", {{"stream", 2000}, {"non_stream", 3000}}},
       {"measured_ms", {{"stream", st.ms}, {"non_stream", ms}}}});
}

// A RunningEngine backed by a FakeEngine, so the real Supervisor can start and restart it.
class FakeRunning final : public engine::RunningEngine {
 public:
  explicit FakeRunning(std::unique_ptr<FakeEngine> e) : engine_(std::move(e)) {}
  pid_t pid() const override { return ::getpid(); }
  engine::EngineEndpoint endpoint() const override { return {"127.0.0.1", engine_->port(), ""}; }
  bool running() override { return !stopped_; }
  std::optional<util::ExitStatus> exit_status() override { return std::nullopt; }
  util::ExitStatus stop(engine::Millis) override {
    stopped_ = true;
    engine_->stop();
    return util::ExitStatus{};
  }
  std::string log_tail(size_t) const override { return ""; }

 private:
  std::unique_ptr<FakeEngine> engine_;
  std::atomic<bool> stopped_{false};
};

TEST(UpstreamFaultsTest, EngineFailingRequestsWithHealthyHealthIsRestarted) {
  // Every engine generation starts healthy; the first one turns bad once the test says so:
  // /health and /slots stay 200, every completion answers 500 (llama.cpp#17316).
  std::atomic<bool> first_bad{false};
  std::atomic<int> launches{0};
  struct Launcher final : engine::EngineLauncher {
    std::atomic<bool>* first_bad;
    std::atomic<int>* launches;
    Result<std::unique_ptr<engine::RunningEngine>> launch(const engine::LaunchSpec&,
                                                          std::function<void(std::string_view)>) override {
      const int generation = ++*launches;
      auto handler = [this, generation](const FakeRequest& r, FakeConnection& c) {
        const bool bad = generation == 1 && first_bad->load();
        const std::string path = r.path.substr(0, r.path.find('?'));
        if (bad && (path == "/v1/chat/completions" || path == "/v1/completions")) {
          c.answer(500, "application/json",
                   R"({"error":{"code":500,"message":"Invalid input batch","type":"server_error"}})");
          return;
        }
        if (FakeEngine::answer_basics(r, c)) return;
        FakeEngine::answer_chat(r, c);
      };
      return std::unique_ptr<engine::RunningEngine>(
          std::make_unique<FakeRunning>(std::make_unique<FakeEngine>(handler)));
    }
  } launcher;
  launcher.first_bad = &first_bad;
  launcher.launches = &launches;

  engine::SupervisorConfig sc;
  sc.timing.health_interval = 60s;  // only the gateway's reports make it probe
  sc.timing.probe_timeout = 2s;
  sc.timing.start_timeout = 10s;
  sc.timing.ready_timeout = 10s;
  sc.restart.zombie_after = 2;
  sc.restart.backoff_initial = 100ms;
  engine::Supervisor supervisor(sc, {.launcher = &launcher});
  GatewayOptions o = fake_options();
  o.on_engine_failure = [&](const std::string& what) { supervisor.report_upstream_failure(what); };
  o.on_requests_failing = [&](const std::string& what) { supervisor.report_requests_failing(what); };
  Front front(
      [&] {
        const auto st = supervisor.status();
        EngineEndpoint ep;
        ep.available = engine::is_serving(st.state) && st.endpoint.has_value();
        ep.state = engine::state_name(st.state);
        if (st.endpoint) ep.port = st.endpoint->port;
        return ep;
      },
      o);
  supervisor.start();
  ASSERT_TRUE(engine::is_serving(
      supervisor
          .wait_until([](const engine::SupervisorStatus& st) { return engine::is_serving(st.state); }, 20s)
          .state));
  auto client = front.client();
  ASSERT_EQ(post_json(client, "/v1/chat/completions", chat_body("before")).status, 200);

  first_bad = true;
  Tally tally;
  int faults = 0;
  const auto t0 = std::chrono::steady_clock::now();
  // Clients keep sending; each sees the engine's error in OpenAI format until kvgate has
  // replaced the engine.
  for (int i = 0; i < 20 && launches.load() < 2; ++i) {
    auto a = post_json(client, "/v1/chat/completions", chat_body("during " + std::to_string(i)));
    if (a.status == 200) break;
    ++faults;
    ASSERT_EQ(a.status, 500) << a.raw;
    ASSERT_FALSE(error_of(a).is_null()) << a.raw;
    EXPECT_EQ(error_of(a)["message"], "Invalid input batch");
    tally.add("500 (the engine's error, relayed)");
    std::this_thread::sleep_for(100ms);
  }
  auto st = supervisor.wait_until(
      [](const engine::SupervisorStatus& s) { return s.generation >= 2 && engine::is_serving(s.state); },
      20s);
  const double restart_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_GE(st.generation, 2u) << st.cause;
  auto a = post_json(client, "/v1/chat/completions", chat_body("after"));
  EXPECT_EQ(a.status, 200) << a.raw;
  tally.add("200 after the restart");
  EXPECT_LE(faults, 4) << "two failed requests in a row switch the probes to real completions";
  supervisor.stop();
  testing::record_reliability(
      "engine_5xx_healthy_health",
      {{"fault", "engine answers 500 to every completion while /health and /slots answer 200"},
       {"expected",
        "the engine's error relayed (OpenAI format); after 2 in a row the probes are real completions; "
        "the engine is restarted after --zombie-after failed probes"},
       {"test", "UpstreamFaultsTest.EngineFailingRequestsWithHealthyHealthIsRestarted"},
       {"faults", faults},
       {"client", tally.to_json()},
       {"engine_restarts", static_cast<int>(st.generation) - 1},
       {"measured_ms", {{"first_failure_to_new_engine", restart_ms}}}});
}

}  // namespace
}  // namespace kvgate::gateway

namespace kvgate::gateway {
namespace {

// The model's output is unusable — the engine's parser rejects it, and so does the replay
// (the field report: "does not match the expected peg-native format (rescue failed: ...)").
// The engine is not broken, so the client gets an answer, marked as rescued raw, not a 500.
// An engine that breaks during the replay is still a 5xx.
TEST(UpstreamFaultsTest, UnusableModelOutputIsAnsweredNotA500) {
  const std::string refused =
      R"({"error":{"code":500,"message":"The model produced output that does not match the expected peg-native format","type":"server_error"}})";
  std::atomic<bool> replay_breaks{false};
  FakeEngine engine([&](const FakeRequest& r, FakeConnection& c) {
    if (FakeEngine::answer_basics(r, c)) return;
    if (r.path == "/apply-template")
      return c.answer(200, "application/json", R"({"prompt":"<|im_start|>user\nhi"})");
    if (r.path == "/completion" && replay_breaks.load()) return c.abort();
    if (r.path == "/v1/chat/completions" && r.body.find("\"stream\":true") != std::string::npos) {
      // As the engine does when streaming: the head is sent, the parser fails at the end.
      c.begin_chunked(200, "text/event-stream");
      c.chunk("data: " + refused + "\n\n");
      return c.end_chunked();
    }
    c.answer(500, "application/json", refused);  // the chat, and its replay
  });
  GatewayOptions o = fake_options();
  Front front([&] { return engine.endpoint(); }, o);
  auto client = front.client();
  auto a = post_json(client, "/v1/chat/completions", chat_body("hi"));
  ASSERT_EQ(a.status, 200) << a.raw;
  EXPECT_EQ(a.body["choices"][0]["message"]["role"], "assistant");
  EXPECT_TRUE(a.body["choices"][0]["message"]["content"].is_string());
  EXPECT_EQ(a.body["kvgate"]["raw"], true);
  EXPECT_GE(engine.count("/completion"), 1u);  // the replay was tried first
  json streamed = chat_body("hi again");
  streamed["stream"] = true;
  auto s = testing::stream_request(front.port(), streamed);
  EXPECT_EQ(s.status, 200);
  EXPECT_FALSE(s.error.has_value()) << s.error->dump();
  EXPECT_TRUE(s.done);
  // The replay's connection breaks: the engine is failing, and that is a 5xx.
  replay_breaks = true;
  auto b = post_json(client, "/v1/chat/completions", chat_body("and now"));
  EXPECT_GE(b.status, 500) << b.raw;
  ASSERT_TRUE(error_of(b).is_object()) << b.raw;
}

// A restart slower than wait_for_engine (a busy machine): while the supervisor says a new
// engine is on its way, a request waits up to wait_for_restart and is answered; an engine
// that is gone for good (the supervisor gave up) is a 503 after wait_for_engine.
TEST(UpstreamFaultsTest, RequestsWaitForASlowRestartButNotForAFailedEngine) {
  FakeEngine engine([](const FakeRequest& r, FakeConnection& c) {
    if (!FakeEngine::answer_basics(r, c)) FakeEngine::answer_chat(r, c);
  });
  GatewayOptions o = fake_options();
  o.wait_for_engine = 300ms;
  o.wait_for_restart = 10s;
  const auto t0 = std::chrono::steady_clock::now();
  std::atomic<bool> failed{false};
  Front front(
      [&] {
        EngineEndpoint ep = engine.endpoint();
        if (failed.load()) {
          ep.available = false;
          ep.state = "failed";
        } else if (std::chrono::steady_clock::now() - t0 < 2s) {
          ep.available = false;
          ep.coming_back = true;
          ep.state = "restarting";
        }
        return ep;
      },
      o);
  auto client = front.client();
  auto a = post_json(client, "/v1/chat/completions", chat_body("after a slow restart"));
  EXPECT_EQ(a.status, 200) << a.raw;
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 2s) << "answered only once the engine was back";

  failed = true;
  const auto t1 = std::chrono::steady_clock::now();
  a = post_json(client, "/v1/chat/completions", chat_body("to a failed engine"));
  EXPECT_EQ(a.status, 503) << a.raw;
  EXPECT_NE(a.raw.find("failed"), std::string::npos) << a.raw;
  EXPECT_LT(std::chrono::steady_clock::now() - t1, 5s) << "no restart to wait for";
}

// An engine that loses a raw completion before answering it (a crash and restart, a broken
// connection): the completion is sent once more, as a chat turn is, whole and streamed, and
// the answer names the model by its id; lost twice, it is the client's 5xx, and the next
// request is served.
TEST(UpstreamFaultsTest, ARawCompletionTheEngineLostIsSentAgain) {
  std::atomic<int> lose{1};  // completions to lose before answering
  FakeEngine engine([&](const FakeRequest& r, FakeConnection& c) {
    if (r.path != "/v1/completions") {
      if (!FakeEngine::answer_basics(r, c)) FakeEngine::answer_chat(r, c);
      return;
    }
    if (lose.fetch_sub(1) > 0) return c.abort();
    const std::string answer =
        R"({"object":"text_completion","model":"/models/x.gguf","choices":[{"text":" rivers","index":0,)"
        R"("finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}})";
    if (r.body.find("\"stream\":true") == std::string::npos) return c.answer(200, "application/json", answer);
    c.begin_chunked(200, "text/event-stream");
    c.chunk("data: " + answer + "\n\n");
    c.chunk("data: [DONE]\n\n");
    c.end_chunked();
  });
  Front front([&] { return engine.endpoint(); }, fake_options());
  auto client = front.client();
  const json body = {{"prompt", "Lakes and"}, {"max_tokens", 2}};
  auto a = post_json(client, "/v1/completions", body);
  EXPECT_EQ(a.status, 200) << a.raw;
  EXPECT_EQ(a.body["model"], "kvgate") << a.raw;
  EXPECT_EQ(engine.count("/v1/completions"), 2u);

  lose = 1;
  json streamed = body;
  streamed["stream"] = true;
  auto s = client.Post("/v1/completions", streamed.dump(), "application/json");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->status, 200) << s->body;
  EXPECT_NE(s->body.find("rivers"), std::string::npos) << s->body;
  EXPECT_NE(s->body.find("data: [DONE]"), std::string::npos) << s->body;
  EXPECT_EQ(engine.count("/v1/completions"), 4u);

  lose = 2;
  a = post_json(client, "/v1/completions", {{"prompt", "Lost twice"}, {"max_tokens", 2}});
  EXPECT_GE(a.status, 500) << a.raw;
  ASSERT_TRUE(error_of(a).is_object()) << a.raw;
  EXPECT_EQ(engine.count("/v1/completions"), 6u);
  a = post_json(client, "/v1/completions", body);
  EXPECT_EQ(a.status, 200) << a.raw;
}

// A client that leaves while kvgate replays an output the engine refused is counted as a
// client that left (status 499 in the metrics), not as a failure of the engine or of kvgate.
TEST(UpstreamFaultsTest, AClientThatLeavesDuringARescueIsCountedAsGone) {
  FakeEngine engine([](const FakeRequest& r, FakeConnection& c) {
    if (r.path == "/v1/chat/completions") {  // the engine's parser refuses the output in the stream
      c.begin_chunked(200, "text/event-stream");
      c.chunk(R"(data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"}}]})"
              "\n\n");
      c.chunk(R"(data: {"error":{"code":500,"type":"server_error","message":"The model produced output that )"
              R"(does not match the expected peg-native format"}})"
              "\n\n");
      return c.end_chunked();
    }
    if (r.path == "/apply-template")
      return c.answer(200, "application/json", R"({"prompt":"user: hi\nassistant:"})");
    if (r.path == "/completion") return c.stall();  // the replay: no answer while the client waits
    if (!FakeEngine::answer_basics(r, c)) FakeEngine::answer_chat(r, c);
  });
  GatewayOptions o = fake_options();
  o.generation_timeout = 30s;
  o.min_upstream_timeout = 30s;
  Front front([&] { return engine.endpoint(); }, o);
  json body = chat_body("leaving during the rescue");
  body["stream"] = true;
  const std::string text = body.dump();
  std::optional<testing::RawConnection> client(std::in_place, front.port());
  ASSERT_TRUE(client->send(
      "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
      "Content-Length: " +
      std::to_string(text.size()) + "\r\n\r\n" + text));
  ASSERT_TRUE(testing::eventually([&] { return engine.count("/completion") > 0; }, 10s))
      << "no replay was asked";
  client.reset();  // the client leaves
  auto c = front.client();
  std::string metrics;
  ASSERT_TRUE(testing::eventually(
      [&] {
        metrics = c.Get("/metrics")->body;
        return metrics.find(R"(kvgate_requests_total{route="chat",status=)") != std::string::npos;
      },
      10s))
      << metrics;
  EXPECT_NE(metrics.find(R"(kvgate_requests_total{route="chat",status="499",stream="true"} 1)"),
            std::string::npos)
      << metrics;
  EXPECT_EQ(metrics.find(R"(kvgate_requests_total{route="chat",status="500")"), std::string::npos) << metrics;
}

}  // namespace
}  // namespace kvgate::gateway
