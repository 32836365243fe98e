// `kvgate serve` in front of three pinned llama-servers the test starts itself (docs/SCALING.md).
//
//  - Twelve conversations take turns, in an order shuffled every round, for at least a minute:
//    with kvgate's affinity each stays on the engine holding its prefix; the same workload
//    (other conversations, so no engine has them cached) through round-robin routing is the
//    baseline measured in the same test. Affinity must compute at most two thirds of the share
//    round-robin computes (prompt tokens computed ÷ prompt tokens, from the engines' own
//    counters, so rescue replays and summaries count too); the arithmetic limit of that ratio
//    is the number of engines (see the test).
//  - One engine SIGKILLed while turns run: no turn fails, its conversations are served by the
//    others, and after it is started again it is routed to again.
//  - One engine SIGKILLed while it computes a streamed request's prompt (the client has the
//    stream's head): another engine finishes the request in the same stream (chat
//    completions, Anthropic Messages, Responses).
#include <chrono>
#include <optional>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>
#include <signal.h>

#include "bench/client_text.h"
#include "bench/engine_queries.h"
#include "bench/http_client.h"
#include "engine/pinned.h"
#include "gguf/synth.h"
#include "testing/engine_e2e.h"
#include "testing/engines_under_test.h"
#include "testing/up_test_support.h"
#include "util/net.h"
#include "util/subprocess.h"

namespace kvgate::cli {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr int kEngines = 3;
constexpr int kConversations = 12;

struct Totals {
  int rounds = 0;
  int turns = 0;
  int failed = 0;
  uint64_t prompt = 0;
  uint64_t cached = 0;
  std::string first_failure;
  double engine_processed = 0;  // prompt tokens the engines computed (their own counters)
  double engine_cached = 0;     // and reused from their caches
  // The engines' share of prompt tokens computed: their real work, rescue replays and
  // summaries included.
  double prefilled_ratio() const {
    const double all = engine_processed + engine_cached;
    return all > 0 ? engine_processed / all : 1.0;
  }
};

// Conversations of one agent: a shared system prompt, each its own task and follow-ups.
class Workload {
 public:
  Workload(uint64_t seed, const std::string& system, nlohmann::json bias)
      : rng_(seed), bias_(std::move(bias)) {
    for (int c = 0; c < kConversations; ++c) {
      json msgs = json::array({{{"role", "system"}, {"content", system}}});
      msgs.push_back(
          {{"role", "user"},
           {"content", fmt::format("Task {}: {}", c, bench::make_text(rng_, bench::TextKind::kProse, 120))}});
      conversations_.push_back(std::move(msgs));
    }
  }

  // One round: every conversation takes a turn, in a shuffled order.
  void round(httplib::Client& client, Totals& t) {
    std::vector<int> order(kConversations);
    for (int i = 0; i < kConversations; ++i) order[static_cast<size_t>(i)] = i;
    for (size_t i = order.size() - 1; i > 0; --i) std::swap(order[i], order[rng_.below(i + 1)]);
    for (int c : order) turn(client, conversations_[static_cast<size_t>(c)], t);
  }

 private:
  void turn(httplib::Client& client, json& msgs, Totals& t) {
    if (msgs.back()["role"] == "assistant") {
      msgs.push_back({{"role", "user"}, {"content", bench::make_text(rng_, bench::TextKind::kProse, 60)}});
    }
    // Plain words: a random-weight model's unbiased output is arbitrary bytes the engine's
    // output parser may reject (a rescue then re-generates, which would blur the figure).
    const json body = {{"messages", msgs}, {"max_tokens", 12}, {"temperature", 0}, {"logit_bias", bias_}};
    ++t.turns;
    auto r = client.Post("/v1/chat/completions", body.dump(), "application/json");
    if (!r || r->status != 200) {
      ++t.failed;
      if (t.first_failure.empty()) {
        t.first_failure =
            r ? fmt::format("{}: {}", r->status, r->body.substr(0, 300)) : httplib::to_string(r.error());
      }
      return;
    }
    const json j = json::parse(r->body, nullptr, false);
    const json usage = j.value("usage", json::object());
    t.prompt += usage.value("prompt_tokens", uint64_t{0});
    t.cached += usage.value("prompt_tokens_details", json::object()).value("cached_tokens", uint64_t{0});
    std::string reply = j["choices"][0]["message"].value("content", "");
    msgs.push_back({{"role", "assistant"}, {"content", reply.empty() ? "(nothing)" : reply}});
  }

  bench::Rng rng_;
  json bias_;
  std::vector<json> conversations_;
};

class FleetE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto model = testing::TempModel::synthesize(*gguf::synth_defaults("qwen3"), "fleet");
    ASSERT_TRUE(model.ok()) << model.error().message();
    model_.emplace(std::move(*model));
    for (int i = 0; i < kEngines; ++i) {
      auto p = util::pick_free_port();
      ASSERT_TRUE(p.ok());
      ports_.push_back(*p);
      engines_.emplace_back();
      start_engine(static_cast<size_t>(i));
    }
  }
  void TearDown() override {
    for (auto& e : engines_) {
      if (e) e->stop();
    }
  }

  // A pinned llama-server with four slots of 8192 tokens (conversations of one engine do not
  // evict each other) and one thread (three engines share the machine).
  void start_engine(size_t i) {
    auto server = engine::resolve_server();
    ASSERT_TRUE(server.ok()) << server.error().message();
    std::vector<std::string> argv = {server->string(),
                                     "-m",
                                     model_->path().string(),
                                     "-c",
                                     "32768",
                                     "-np",
                                     "4",
                                     "-ngl",
                                     "0",
                                     "--no-context-shift",
                                     "--jinja",
                                     "--metrics",
                                     "-t",
                                     testing::engine_threads(),
                                     "--host",
                                     "127.0.0.1",
                                     "--port",
                                     std::to_string(ports_[i])};
    auto p = util::Subprocess::spawn({.argv = argv, .on_line = [](std::string_view) {}});
    ASSERT_TRUE(p.ok()) << p.error().message();
    engines_[i] = std::move(*p);
  }

  std::vector<std::string> serve_args(uint16_t port, const std::string& routing) const {
    std::vector<std::string> a;
    for (uint16_t p : ports_) a.insert(a.end(), {"--upstream", fmt::format("http://127.0.0.1:{}", p)});
    a.insert(a.end(), {"--listen", fmt::format("127.0.0.1:{}", port), "--state-dir", "none", "--routing",
                       routing, "--health-interval", "1s", "--probe-timeout", "2s"});
    return a;
  }

  // Rounds of the workload through kvgate serve with `routing`: at least `rounds`, and for at
  // least `duration`; it stops at the first failed turn (which fails the test), else a serve
  // that died would count thousands of instant rounds and the second run would repeat them.
  Totals run(const std::string& routing, uint64_t seed, int rounds, std::chrono::seconds duration) {
    const uint16_t port = *util::pick_free_port();
    testing::UpProcess serve(serve_args(port, routing), {}, "serve");
    EXPECT_TRUE(serve.wait_ready(std::chrono::seconds(180))) << serve.output();
    httplib::Client client("127.0.0.1", port);
    client.set_read_timeout(120, 0);
    Workload w(seed, system_prompt(), bias());
    Totals t;
    const auto [processed0, cached0] = engine_counters();
    const auto end = Clock::now() + duration;
    for (t.rounds = 0; (t.rounds < rounds || Clock::now() < end) && t.failed == 0; ++t.rounds)
      w.round(client, t);
    const auto [processed1, cached1] = engine_counters();
    t.engine_processed = processed1 - processed0;
    t.engine_cached = cached1 - cached0;
    return t;
  }

  // The sum of the engines' own prompt counters (servers started with --metrics).
  std::pair<double, double> engine_counters() const {
    double processed = 0, cached = 0;
    for (uint16_t p : ports_) {
      bench::HttpClient c({.port = p}, std::chrono::seconds(30), false);
      auto k = bench::engine_counters(c);
      EXPECT_TRUE(k.ok()) << (k.ok() ? "" : k.error().message());
      if (!k.ok()) continue;
      processed += k->processed;
      cached += k->cached;
    }
    return {processed, cached};
  }

  json bias() const {
    bench::HttpClient c({.port = ports_[0]}, std::chrono::seconds(30), false);
    auto b = bench::word_bias(c);
    EXPECT_TRUE(b.ok()) << (b.ok() ? "" : b.error().message());
    return b.ok() ? *b : json::array();
  }

  static std::string system_prompt() {
    bench::Rng rng(7);
    return "You are a careful coding agent. " + bench::make_text(rng, bench::TextKind::kProse, 300);
  }

  std::optional<testing::TempModel> model_;
  std::vector<uint16_t> ports_;
  std::vector<std::unique_ptr<util::Subprocess>> engines_;
};

TEST_F(FleetE2eTest, AffinityRecomputesLessThanRoundRobinDoes) {
  // The same workload (as many rounds) both ways, for a minute at least.
  const Totals affinity = run("affinity", 11, 3, std::chrono::seconds(60));
  const Totals round_robin = run("round-robin", 12, affinity.rounds, std::chrono::seconds(0));
  std::printf(
      "fleet: 3 engines, 12 conversations, %d rounds each way: affinity %d turns, engines computed %.3f of "
      "prompt tokens "
      "(%.0f of %.0f); round-robin %d turns, %.3f (%.0f of %.0f); round-robin/affinity %.2f\n",
      affinity.rounds, affinity.turns, affinity.prefilled_ratio(), affinity.engine_processed,
      affinity.engine_processed + affinity.engine_cached, round_robin.turns, round_robin.prefilled_ratio(),
      round_robin.engine_processed, round_robin.engine_processed + round_robin.engine_cached,
      round_robin.prefilled_ratio() / affinity.prefilled_ratio());
  RecordProperty("affinity_prefilled_ratio", fmt::format("{:.3f}", affinity.prefilled_ratio()));
  RecordProperty("round_robin_prefilled_ratio", fmt::format("{:.3f}", round_robin.prefilled_ratio()));
  EXPECT_EQ(affinity.failed, 0) << affinity.first_failure;
  EXPECT_EQ(round_robin.failed, 0) << round_robin.first_failure;
  EXPECT_GE(affinity.turns, 3 * kConversations);
  // Round-robin sends a conversation back to an engine about every `engines` turns, and that
  // engine (its own gateway recognising the conversation, its own prompt cache) computes the
  // turns it missed: about `engines` increments where affinity computes one, plus the same
  // first prefills. So the ratio approaches the engine count (3) and cannot pass it; at least
  // half of it is required.
  EXPECT_LE(1.5 * affinity.prefilled_ratio(), round_robin.prefilled_ratio());
}

json get_json(httplib::Client& c, const std::string& path) {
  auto r = c.Get(path);
  return r ? json::parse(r->body, nullptr, false) : json();
}

TEST_F(FleetE2eTest, AnEngineKilledMidRunCostsNoTurnAndRejoinsAfterItsRestart) {
  const uint16_t port = *util::pick_free_port();
  testing::UpProcess serve(serve_args(port, "affinity"), {}, "serve");
  ASSERT_TRUE(serve.wait_ready(std::chrono::seconds(180))) << serve.output();
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(120, 0);
  Workload w(21, system_prompt(), bias());
  Totals t;
  w.round(client, t);
  const json before = get_json(client, "/kvgate/v1/status");
  ASSERT_EQ(before["upstreams"].size(), 3u) << before.dump().substr(0, 600);
  const uint64_t pinned_on_victim = before["upstreams"][1]["routing"].value("conversations", uint64_t{0});
  EXPECT_EQ(pinned_on_victim, 4u) << "12 conversations on 3 engines of 4 slots: "
                                  << before["upstreams"].dump().substr(0, 600);

  // Kill engine 1 while the next rounds run (a round takes about a second here), and go on
  // until it has been out for several rounds.
  std::thread killer([this] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    engines_[1]->signal_group(SIGKILL);
  });
  const auto until = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < until) w.round(client, t);
  killer.join();
  engines_[1]->stop();
  EXPECT_EQ(t.failed, 0) << t.first_failure;
  const json during = get_json(client, "/kvgate/v1/status");
  EXPECT_FALSE(during["upstreams"][1]["routing"].value("up", true))
      << during["upstreams"][1]["routing"].dump();
  EXPECT_GE(during["upstreams"][1]["routing"].value("moves_out", uint64_t{0}), 1u)
      << during["upstreams"][1]["routing"].dump();
  const json health = get_json(client, "/health");
  EXPECT_EQ(health.value("status", ""), "ok") << health.dump();

  // Started again: it is routed to again once it has stayed healthy.
  start_engine(1);
  bool rejoined = false;
  for (int i = 0; i < 120 && !rejoined; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    rejoined = get_json(client, "/kvgate/v1/status")["upstreams"][1]["routing"].value("up", false);
  }
  EXPECT_TRUE(rejoined) << get_json(client, "/kvgate/v1/status")["upstreams"][1]["routing"].dump();
  // New conversations go to it first: it is the least loaded.
  Workload fresh(22, system_prompt(), bias());
  fresh.round(client, t);
  EXPECT_EQ(t.failed, 0) << t.first_failure;
  const json after = get_json(client, "/kvgate/v1/status");
  EXPECT_GT(after["upstreams"][1]["routing"].value("placements", uint64_t{0}),
            before["upstreams"][1]["routing"].value("placements", uint64_t{0}))
      << after["upstreams"][1]["routing"].dump();
  auto metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find(
                fmt::format("kvgate_upstream_routed{{upstream=\"http://127.0.0.1:{}\"}} 1", ports_[1])),
            std::string::npos)
      << metrics->status << " " << metrics->body.substr(0, 600);
  EXPECT_NE(metrics->body.find("kvgate_requests_total{upstream="), std::string::npos);
}

// The index of the engine whose slot is computing a prompt, stopped (SIGSTOP) as soon as it
// is seen, so that its prefill lasts as long as the test needs; nullopt after `limit`.
std::optional<size_t> stop_the_busy_engine(const std::vector<uint16_t>& ports,
                                           std::vector<std::unique_ptr<util::Subprocess>>& engines,
                                           std::chrono::seconds limit) {
  const auto until = Clock::now() + limit;
  while (Clock::now() < until) {
    for (size_t i = 0; i < ports.size(); ++i) {
      httplib::Client engine("127.0.0.1", ports[i]);
      engine.set_read_timeout(2, 0);
      auto slots = engine.Get("/slots");
      if (!slots || slots->status != 200) continue;
      for (const json& slot : json::parse(slots->body, nullptr, false)) {
        if (!slot.is_object() || !slot.value("is_processing", false)) continue;
        engines[i]->signal_group(SIGSTOP);
        return i;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return std::nullopt;
}

size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

// The engine computing a streamed request's prompt dies while the client has only the
// stream's head, opening events and keep-alives (the engine is stopped while it computes,
// then SIGKILLed once the head is out): another engine serves the request in the same stream.
class StreamHandOnTest : public FleetE2eTest {
 protected:
  // The stream the client received for `body` POSTed to `path`, and whether all went as
  // planned (an engine stopped in its prefill, killed before any event of the answer).
  std::string stream_through_a_kill(const std::string& path, const json& body) {
    const uint16_t port = *util::pick_free_port();
    testing::UpProcess serve(serve_args(port, "affinity"), {}, "serve");
    EXPECT_TRUE(serve.wait_ready(std::chrono::seconds(180))) << serve.output();
    std::thread stopper([&] { victim_ = stop_the_busy_engine(ports_, engines_, std::chrono::seconds(60)); });
    std::string received;
    bool killed = false;
    httplib::Request req;
    req.method = "POST";
    req.path = path;
    req.body = body.dump();
    req.set_header("Content-Type", "application/json");
    req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
      received.append(data, n);
      if (!killed && stopper.joinable()) {
        stopper.join();  // the head went out while the engine was stopped in its prefill
        if (victim_) engines_[*victim_]->signal_group(SIGKILL);
        killed = victim_.has_value();
        before_kill_ = received;
      }
      return true;
    };
    httplib::Client client("127.0.0.1", port);
    client.set_read_timeout(300, 0);
    auto res = client.send(req);
    if (stopper.joinable()) stopper.join();
    EXPECT_TRUE(res) << httplib::to_string(res.error());
    EXPECT_TRUE(killed) << "no engine was seen computing the prompt";
    if (res) {
      EXPECT_EQ(res->status, 200);
    }
    if (victim_) {
      const json status = get_json(client, "/kvgate/v1/status");
      failovers_ = status["upstreams"][*victim_]["routing"].value("failovers", uint64_t{0});
      engines_[*victim_]->stop();
    }
    std::printf("[figures] %s: engine %s killed during the prefill after %zu bytes; the stream: %zu bytes\n",
                path.c_str(), victim_ ? std::to_string(*victim_).c_str() : "none", before_kill_.size(),
                received.size());
    return received;
  }

  static std::string task() {
    bench::Rng rng(31);
    return bench::make_text(rng, bench::TextKind::kProse, 6000);  // seconds of prefill on one thread
  }

  std::optional<size_t> victim_;
  std::string before_kill_;  // what the client had when the engine was killed
  uint64_t failovers_ = 0;
};

TEST_F(StreamHandOnTest, AChatStreamIsFinishedByAnotherEngine) {
  const json body = {{"messages", json::array({{{"role", "system"}, {"content", system_prompt()}},
                                               {{"role", "user"}, {"content", task()}}})},
                     {"max_tokens", 8},
                     {"stream", true}};
  const std::string got = stream_through_a_kill("/v1/chat/completions", body);
  EXPECT_EQ(before_kill_.find("data:"), std::string::npos) << before_kill_;  // head and keep-alives only
  EXPECT_EQ(got.find("\"error\""), std::string::npos) << got.substr(0, 600);
  EXPECT_NE(got.find("\"choices\""), std::string::npos) << got.substr(0, 600);
  EXPECT_EQ(occurrences(got, "data: [DONE]"), 1u) << got.substr(0, 600);
  EXPECT_GE(failovers_, 1u);
}

TEST_F(StreamHandOnTest, AnAnthropicMessagesStreamIsFinishedByAnotherEngine) {
  const json body = {{"model", "kvgate"},
                     {"max_tokens", 8},
                     {"stream", true},
                     {"system", system_prompt()},
                     {"messages", json::array({{{"role", "user"}, {"content", task()}}})}};
  const std::string got = stream_through_a_kill("/v1/messages", body);
  EXPECT_EQ(got.find("event: error"), std::string::npos) << got.substr(0, 600);
  EXPECT_EQ(occurrences(got, "event: message_start"), 1u) << got.substr(0, 600);
  EXPECT_EQ(occurrences(got, "event: message_stop"), 1u) << got.substr(0, 600);
  EXPECT_GE(failovers_, 1u);
}

TEST_F(StreamHandOnTest, AResponsesStreamIsFinishedByAnotherEngine) {
  const json body = {{"model", "kvgate"},
                     {"max_output_tokens", 16},
                     {"stream", true},
                     {"instructions", system_prompt()},
                     {"input", task()}};
  const std::string got = stream_through_a_kill("/v1/responses", body);
  EXPECT_EQ(got.find("response.failed"), std::string::npos) << got.substr(0, 600);
  EXPECT_EQ(occurrences(got, "event: response.created"), 1u) << got.substr(0, 600);
  // The reply ends by max_output_tokens or by itself: one terminal event either way.
  EXPECT_EQ(occurrences(got, "event: response.completed") + occurrences(got, "event: response.incomplete"),
            1u)
      << got.substr(got.size() > 600 ? got.size() - 600 : 0);
  EXPECT_GE(failovers_, 1u);
}

}  // namespace
}  // namespace kvgate::cli
