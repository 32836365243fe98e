// Faults against the real `kvgate up` (the binary) serving the real pinned engine: the engine
// SIGKILLed before a request, during a prefill and mid-stream, SIGSTOPped; a non-loopback
// bind without a key. Each case records what clients saw for docs/RELIABILITY.md
// (testing/fault_support.h). The session store's faults and kvgate's own are in
// up_state_faults_e2e_test.cc.
//
// The quick cases run with the e2e tests; the long ones need KVGATE_FAULTS=1.
#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include "testing/engines_under_test.h"
#include "testing/up_faults.h"

namespace kvgate::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;
using testing::conversation;
using testing::kind_of;
using testing::ms_since;
using testing::record_reliability;
using testing::stream_request;
using testing::UpFaultsTest;
using testing::UpProcess;
using Clock = testing::FaultClock;

// ---- the engine --------------------------------------------------------------------------

// The engine faults, against both engines (the ik_llama.cpp build when one is available).
class UpEngineFaultsTest : public UpFaultsTest, public ::testing::WithParamInterface<plan::Fork> {
 protected:
  void SetUp() override {
    UpFaultsTest::SetUp();
    if (GetParam() == plan::Fork::kIk) {
      auto ik = testing::ik_server_under_test();
      if (!ik) GTEST_SKIP() << testing::kIkAbsent;
      server_args_ = {"--server", ik->string()};
    }
  }

  // The answer to `request`, whose engine was SIGKILLed once kvgate had admitted the request
  // and was working with the engine (the test fails when that was never seen).
  testing::JsonAnswer answer_killed_while_working(const std::function<testing::JsonAnswer()>& request) {
    const pid_t engine = up_->engine_pid();
    std::atomic<bool> answered{false};
    std::atomic<bool> killed{false};
    auto working = [&] {
      const json now = status();
      return now.is_object() && now.contains("queue") && now["queue"].value("active", 0) > 0;
    };
    std::jthread killer([&] {
      while (!answered.load() && !working()) std::this_thread::sleep_for(5ms);
      if (answered.load()) return;
      ::kill(engine, SIGKILL);
      killed = true;
    });
    testing::JsonAnswer a = request();
    answered = true;
    killer.join();
    EXPECT_TRUE(killed.load()) << "the request was never seen working: " << a.raw;
    return a;
  }
};
INSTANTIATE_TEST_SUITE_P(Engines, UpEngineFaultsTest,
                         ::testing::Values(plan::Fork::kMainline, plan::Fork::kIk),
                         [](const ::testing::TestParamInfo<plan::Fork>& i) {
                           return std::string(plan::fork_name(i.param));
                         });

TEST_P(UpEngineFaultsTest, EngineKilledBetweenRequestsAndMidStream) {
  auto model = synth(*gguf::synth_defaults("qwen3"));
  start(args(model));
  std::map<std::string, int> client;
  json messages = conversation("kill", 1);
  auto a = chat(messages);
  ASSERT_EQ(a.status, 200) << a.raw;
  messages.push_back(a.body["choices"][0]["message"]);
  messages.push_back({{"role", "user"}, {"content", "[kill] and next?"}});

  // 1. SIGKILL between two requests; the next one arrives at once.
  const pid_t first = up_->engine_pid();
  ASSERT_GT(first, 0);
  ::kill(first, SIGKILL);
  const auto t0 = Clock::now();
  size_t before = wait_events(1);
  a = chat(messages);
  const double between_ms = ms_since(t0);
  client[kind_of(a)]++;
  ASSERT_EQ(a.status, 200) << a.raw << up_->output();
  EXPECT_EQ(up_->engine_starts(), 2);
  json ev = next_request_event(before);
  EXPECT_EQ(ev.value("recognised_by", ""), "prefix") << ev.dump();
  const std::string session = ev.value("session", "");
  messages.push_back(a.body["choices"][0]["message"]);
  messages.push_back({{"role", "user"}, {"content", "[kill] a long answer please"}});

  // 2. SIGKILL while the answer streams: the client gets what was relayed, an error event,
  //    and the end of the stream; the turn is not committed, so sending it again works.
  std::atomic<bool> killed{false};
  const pid_t second = up_->engine_pid();
  auto st = stream_request(port_, body(messages, 400), {}, 60s, [&](const testing::StreamOutcome& o) {
    if (!killed && !o.content.empty()) {
      ::kill(second, SIGKILL);
      killed = true;
    }
    return true;
  });
  ASSERT_TRUE(killed.load()) << st.body;
  EXPECT_EQ(st.status, 200);
  EXPECT_FALSE(st.transport_error) << "the client's stream must end properly";
  ASSERT_TRUE(st.error.has_value()) << st.body;
  EXPECT_EQ(st.error->value("type", ""), "server_error");
  EXPECT_FALSE(st.done);
  EXPECT_LT(st.ms, 10000);
  client["200 + partial + in-stream error"]++;
  before = wait_events(3);  // the two turns and the cut stream
  a = chat(messages);
  client[kind_of(a)]++;
  ASSERT_EQ(a.status, 200) << a.raw;
  ev = next_request_event(before);
  EXPECT_EQ(ev.value("session", ""), session) << "the same conversation, recognised again";
  EXPECT_EQ(ev.value("recognised_by", ""), "prefix");
  EXPECT_EQ(up_->engine_starts(), 3);
  EXPECT_TRUE(up_->running());
  record_reliability(
      "engine_sigkill_between_and_mid_stream",
      {{"fault", "engine SIGKILLed between requests, and while an answer streams"},
       {"expected",
        "between: the request waits for the restart and is answered; mid-stream: partial "
        "answer + in-stream error, stream ended; the turn is not committed; the engine is "
        "restarted; the session is recognised after"},
       {"test", "UpFaultsTest.EngineKilledBetweenRequestsAndMidStream"},
       {"faults", 2},
       {"client", client},
       {"engine_restarts", up_->engine_starts() - 1},
       {"measured_ms", {{"request_after_kill", between_ms}, {"mid_stream_kill_to_end", st.ms}}}});
}

// A raw completion after the engine was SIGKILLed between two of them is answered, whole
// and streamed, as a chat turn is: the request waits for the restart and is sent to the new
// engine instead of failing with the old engine's refused connection.
TEST_P(UpEngineFaultsTest, EngineKilledBetweenRawCompletions) {
  auto model = synth(*gguf::synth_defaults("qwen3"));
  start(args(model));
  httplib::Client c("127.0.0.1", port_);
  c.set_read_timeout(120s);
  const json body = {{"prompt", "Lakes and rivers"}, {"max_tokens", 4}, {"logit_bias", bias_}};
  auto a = testing::post_json(c, "/v1/completions", body);
  ASSERT_EQ(a.status, 200) << a.raw;

  ::kill(up_->engine_pid(), SIGKILL);
  a = testing::post_json(c, "/v1/completions", body);
  EXPECT_EQ(a.status, 200) << a.raw << up_->output();
  EXPECT_EQ(a.body.value("object", ""), "text_completion") << a.raw;
  EXPECT_EQ(up_->engine_starts(), 2);

  ::kill(up_->engine_pid(), SIGKILL);
  json streamed = body;
  streamed["stream"] = true;
  auto s = c.Post("/v1/completions", streamed.dump(), "application/json");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->status, 200) << s->body;
  EXPECT_NE(s->body.find("data: [DONE]"), std::string::npos) << s->body;
  EXPECT_EQ(s->body.find("\"error\""), std::string::npos) << s->body;
  EXPECT_EQ(up_->engine_starts(), 3);
  EXPECT_TRUE(up_->running());
}

TEST_P(UpEngineFaultsTest, EngineKilledDuringPrefill) {
  KVGATE_REQUIRE_LONG_SUITE();
  // A model slow enough to prefill for seconds on two cores.
  gguf::SynthSpec spec = *gguf::synth_defaults("qwen3");
  spec.n_layer = 8;
  spec.n_embd = 768;
  spec.n_head = 12;
  spec.n_head_kv = 4;
  spec.head_dim = 64;
  spec.n_ff = 3072;
  auto model = synth(spec);
  // A probe may wait 30 s: the engine is busy for seconds on two shared cores, and a probe that
  // gives up early restarts it a second time, which this test is not about.
  start(args(model,
             {"--ctx", "8192", "--start-timeout", "2m", "--ready-timeout", "2m", "--probe-timeout", "30s"}));
  auto long_prompt = [](const std::string& tag) {
    std::string filler;
    for (int i = 0; i < 400; ++i)
      filler += fmt::format("line {} of the {} report on rivers and lakes. ", i, tag);
    json m = conversation(tag, 1);
    m.back()["content"] = m.back()["content"].get<std::string>() + " " + filler;
    return m;
  };
  // How long one such prefill takes here.
  auto t0 = Clock::now();
  auto calib = chat(long_prompt("calibration"), 1);
  const double prefill_ms = ms_since(t0);
  ASSERT_EQ(calib.status, 200) << calib.raw;
  const uint64_t prompt_tokens = calib.body["usage"]["prompt_tokens"];
  ASSERT_GT(prefill_ms, 1500) << "the prefill must last long enough to be interrupted";
  std::map<std::string, int> client;
  const int first_starts = up_->engine_starts();

  // Streamed: killed at the first prefill progress the client sees (ik sends no progress:
  // at the first keep-alive before any content, which is also during the prefill).
  int starts = up_->engine_starts();
  const pid_t engine = up_->engine_pid();
  std::atomic<bool> killed{false};
  std::string killed_at;
  const bool progress = GetParam() == plan::Fork::kMainline;
  t0 = Clock::now();
  auto st =
      stream_request(port_, body(long_prompt("stream"), 4), {}, 120s, [&](const testing::StreamOutcome& o) {
        if (!killed && !o.comments.empty() &&
            (!progress || o.comments.back().find("prefill") != std::string::npos) && o.content.empty()) {
          killed_at = o.comments.back();
          ::kill(engine, SIGKILL);
          killed = true;
        }
        return true;
      });
  const double stream_ms = ms_since(t0);
  ASSERT_TRUE(killed.load()) << "no prefill progress was seen: " << st.body.substr(0, 500);
  EXPECT_EQ(st.status, 200);
  EXPECT_TRUE(st.done) << "the request is sent again to the restarted engine and completes: "
                       << st.body.substr(0, 500);
  EXPECT_FALSE(st.error.has_value()) << st.body.substr(0, 500);
  EXPECT_EQ(up_->engine_starts(), starts + 1);
  client[st.done ? "200 completed (sent again after the restart)" : "200 + in-stream error"]++;

  // Not streamed: killed once kvgate has admitted the request and it is working with the
  // engine (whatever the machine's speed, while the prefill of seconds runs).
  starts = up_->engine_starts();
  t0 = Clock::now();
  auto a = answer_killed_while_working([&] { return chat(long_prompt("plain"), 4); });
  const double plain_ms = ms_since(t0);
  EXPECT_EQ(a.status, 200) << a.raw;
  EXPECT_EQ(up_->engine_starts(), starts + 1);
  client[kind_of(a) + (a.status == 200 ? " completed (sent again after the restart)" : "")]++;

  // A raw completion of the same length, killed the same way: sent again as a turn is.
  starts = up_->engine_starts();
  const auto raw = answer_killed_while_working([&] {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(120s);
    return testing::post_json(
        c, "/v1/completions",
        {{"prompt", long_prompt("raw").back()["content"]}, {"max_tokens", 4}, {"logit_bias", bias_}});
  });
  EXPECT_EQ(raw.status, 200) << raw.raw;
  EXPECT_EQ(up_->engine_starts(), starts + 1);
  client["raw completion: " + kind_of(raw) +
         (raw.status == 200 ? " completed (sent again after the restart)" : "")]++;
  EXPECT_TRUE(up_->running());
  record_reliability(
      "engine_sigkill_during_prefill",
      {{"fault",
        fmt::format(
            "engine SIGKILLed during the prefill of a {}-token prompt (stream: at the first "
            "progress event, \"{}\"; non-stream and a raw completion: once admitted, a prefill of {:.0f} ms)",
            prompt_tokens, killed_at.substr(2, killed_at.find('\n') - 2), prefill_ms)},
       {"expected",
        "nothing had reached the client: the request is sent again to the restarted engine "
        "and completes"},
       {"test", "UpFaultsTest.EngineKilledDuringPrefill"},
       {"faults", 3},
       {"client", client},
       {"engine_restarts", up_->engine_starts() - first_starts},
       {"measured_ms",
        {{"stream_total", stream_ms}, {"non_stream_total", plain_ms}, {"one_prefill", prefill_ms}}},
       {"result", a.status == 200 && st.done && raw.status == 200 ? "pass" : "fail"}});
}

TEST_P(UpEngineFaultsTest, EngineStoppedIsDetectedKilledAndRequestsComplete) {
  KVGATE_REQUIRE_LONG_SUITE();
  auto model = synth(*gguf::synth_defaults("qwen3"));
  // Two slots, so that both requests are with the engine when it is found frozen: neither
  // was alone with it, so neither is taken for its cause (fatal_requests.h; the request that
  // was alone is EngineStoppedWithOneRequestIsNotSentItAgain).
  start(args(model, {"--np", "2"}));
  std::map<std::string, int> client;
  ASSERT_EQ(chat(conversation("hang", 1)).status, 200);
  const pid_t engine = up_->engine_pid();
  ::kill(engine, SIGSTOP);
  const auto t0 = Clock::now();
  // Two requests reach the frozen engine: one streamed, one not.
  testing::StreamOutcome st;
  std::jthread streamer(
      [&] { st = stream_request(port_, body(conversation("hang-stream", 1), 8), {}, 120s); });
  auto a = chat(conversation("hang-plain", 1));
  streamer.join();
  const double ms = ms_since(t0);
  client[kind_of(a)]++;
  client[st.done ? "200 stream completed" : st.error ? "200 + in-stream error" : "stream broken"]++;
  EXPECT_EQ(a.status, 200) << a.raw;
  EXPECT_TRUE(st.done || st.error.has_value()) << st.body;
  EXPECT_FALSE(st.transport_error);
  EXPECT_FALSE(testing::process_alive(engine)) << "the frozen engine was killed";
  EXPECT_EQ(up_->engine_starts(), 2);
  EXPECT_NE(up_->output().find("zombie"), std::string::npos) << up_->output();
  // Bound: --zombie-after 2 × (--health-interval 0.5 s + --probe-timeout 2 s) + stop grace
  // 2 s + restart, well under the upstream time-out.
  EXPECT_LT(ms, 20000);
  record_reliability(
      "engine_sigstop",
      {{"fault", "engine SIGSTOPped (frozen: /health no longer answers either) with two requests on it"},
       {"expected",
        "detected by the deep probes (--zombie-after × (--health-interval + --probe-timeout)), "
        "killed and restarted; the requests, of which nothing was relayed, are sent again "
        "and complete"},
       {"test", "UpFaultsTest.EngineStoppedIsDetectedKilledAndRequestsComplete"},
       {"faults", 1},
       {"client", client},
       {"engine_restarts", up_->engine_starts() - 1},
       {"measured_ms", {{"stop_to_both_answered", ms}}},
       {"bound_ms", 20000},
       {"result", a.status == 200 && !st.transport_error ? "pass" : "fail"}});
}

// A request that hangs the engine, on the real engine: stopped (SIGSTOP) with one request on
// it. That request is not sent to the restarted engine, an identical one is refused before it
// reaches it, and every other request is served.
TEST_P(UpEngineFaultsTest, EngineStoppedWithOneRequestIsNotSentItAgain) {
  KVGATE_REQUIRE_LONG_SUITE();
  auto model = synth(*gguf::synth_defaults("qwen3"));
  start(args(model));
  std::map<std::string, int> client;
  ASSERT_EQ(chat(conversation("before the freeze", 1)).status, 200);
  const int starts = up_->engine_starts();
  const pid_t engine = up_->engine_pid();
  const json frozen = conversation("the request that froze the engine", 1);
  // Stopped, then the request sent: it is alone with the engine when the supervisor finds the
  // engine frozen and kills it, which is all kvgate can see of a request that hangs it.
  ::kill(engine, SIGSTOP);
  const auto t0 = Clock::now();
  auto a = chat(frozen);
  const double frozen_ms = ms_since(t0);
  client[kind_of(a)]++;
  EXPECT_EQ(a.status, 502) << a.raw;
  EXPECT_NE(a.raw.find("request_stopped_engine"), std::string::npos) << a.raw;
  EXPECT_FALSE(testing::process_alive(engine)) << "the frozen engine was killed";
  EXPECT_EQ(up_->engine_starts(), starts + 1)
      << "one restart, and the request was not sent to the new engine";

  auto again = chat(frozen);
  client[kind_of(again) + " (the same request again)"]++;
  EXPECT_EQ(again.status, 400) << again.raw;
  EXPECT_NE(again.raw.find("request_stopped_engine"), std::string::npos) << again.raw;
  auto other = chat(conversation("another conversation", 1));
  client[kind_of(other) + " (another request)"]++;
  EXPECT_EQ(other.status, 200) << other.raw;
  EXPECT_EQ(up_->engine_starts(), starts + 1);
  EXPECT_TRUE(up_->running());
  record_reliability(
      "engine_sigstop_one_request",
      {{"fault",
        "engine SIGSTOPped, then one request sent: alone with the frozen engine (what a request that "
        "hangs it looks like)"},
       {"expected",
        "the engine is killed and restarted; that request gets a 502 request_stopped_engine and is not sent "
        "to "
        "the new engine; the same request again gets a 400 without reaching it; other requests are served"},
       {"test", "UpEngineFaultsTest.EngineStoppedWithOneRequestIsNotSentItAgain"},
       {"faults", 1},
       {"client", client},
       {"engine_restarts", up_->engine_starts() - starts},
       {"measured_ms", {{"stop_to_502", frozen_ms}}},
       {"result", a.status == 502 && again.status == 400 && other.status == 200 ? "pass" : "fail"}});
}

TEST_F(UpFaultsTest, NonLoopbackListenWithoutAKeyIsRefused) {
  auto model = synth(*gguf::synth_defaults("qwen3"));
  std::map<std::string, int> client;
  for (const std::string listen : {"0.0.0.0", "[::]", "192.0.2.10", "[2001:db8::1]", "10.1.2.3"}) {
    UpProcess up({model.string(), "--listen", fmt::format("{}:{}", listen, port_), "--log-dir",
                  (dir_ / "logs").string()});
    EXPECT_EQ(up.wait_exit(), 2) << listen;
    EXPECT_NE(up.output().find("give --api-key"), std::string::npos) << up.output();
    EXPECT_EQ(up.output().find("engine start"), std::string::npos) << "nothing starts";
    client["exit 2 (" + listen + ")"]++;
  }
  // The same from a config file.
  {
    std::ofstream(dir_ / "c.json") << fmt::format(R"({{"listen": "0.0.0.0:{}"}})", port_);
    UpProcess up(
        {model.string(), "--config", (dir_ / "c.json").string(), "--log-dir", (dir_ / "logs").string()});
    EXPECT_EQ(up.wait_exit(), 2);
    EXPECT_NE(up.output().find("give --api-key"), std::string::npos) << up.output();
    client["exit 2 (config file)"]++;
  }
  record_reliability(
      "abuse_open_bind_without_key",
      {{"fault",
        "--listen 0.0.0.0, [::], LAN and documentation addresses, and via --config, without --api-key"},
       {"expected", "refused with exit 2 before anything starts"},
       {"test", "UpFaultsTest.NonLoopbackListenWithoutAKeyIsRefused"},
       {"faults", 6},
       {"client", client}});
}

}  // namespace
}  // namespace kvgate::cli
