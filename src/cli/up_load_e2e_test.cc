// Load through the real `kvgate up` (long suite, KVGATE_FAULTS=1): more conversations than the
// engine has slots, for minutes (KVGATE_LOAD_SECONDS, default 180), loopback only. Checks that
// nothing deadlocks (every request is answered within its bound), that kvgate's memory stays
// bounded (RSS sampled every 5 s), that conversations take turns (fair queuing), that one
// conversation's concurrent requests are served in the order they were sent, and that requests
// beyond capacity get 429 with Retry-After instead of piling up.
#include <algorithm>
#include <atomic>
#include <filesystem>
#include <map>
#include <mutex>
#include <numeric>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include "engine/pinned.h"
#include "gguf/file.h"
#include "gguf/synth.h"
#include "testing/engines_under_test.h"
#include "testing/fault_support.h"
#include "testing/up_test_support.h"
#include "util/net.h"

namespace kvgate::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

constexpr int kSlots = 2, kConversations = 16, kQueue = 8;

// The logit bias that makes the random model speak plain words, asked through kvgate.
json plain_words_bias(uint16_t port) {
  json bias = json::array();
  httplib::Client c("127.0.0.1", port);
  auto res =
      c.Post("/tokenize", R"({"content":" the of and to a in is it that for on with as was he by at"})",
             "application/json");
  EXPECT_TRUE(res && res->status == 200);
  if (!res || res->status != 200) return bias;
  // (Parsed into a variable: a range-for over a member of a temporary reads freed memory.)
  const json reply = json::parse(res->body, nullptr, false);
  if (reply.is_object()) {
    for (const auto& id : reply.value("tokens", json::array())) bias.push_back({id, 100});
  }
  return bias;
}

// What the load's clients saw, shared by their threads.
struct LoadOutcome {
  std::mutex mu;
  std::map<std::string, int> outcomes;  // status/code → count
  std::vector<int> completed = std::vector<int>(kConversations, 0);
  double worst_latency_s = 0;
  int refusals_without_retry_after = 0;
};

// One answer as a client sees it: status (599: an in-stream error), error code, Retry-After.
struct TurnAnswer {
  int status = 0;
  std::string code;
  int retry_after = 0;
  std::string reply;
};

TurnAnswer streamed_turn(uint16_t port, const json& body) {
  TurnAnswer a;
  auto st = testing::stream_request(port, body, {}, 120s);
  a.status = st.status;
  if (st.status == 200 && st.done) a.reply = st.content;
  if (st.status == 200 && !st.done) a.status = 599;
  if (st.error && st.error->contains("code") && (*st.error)["code"].is_string())
    a.code = (*st.error)["code"].get<std::string>();
  a.retry_after = st.retry_after_s;
  return a;
}

TurnAnswer plain_turn(httplib::Client& c, const json& body) {
  TurnAnswer a;
  auto res = c.Post("/v1/chat/completions", body.dump(), "application/json");
  a.status = res ? res->status : 0;
  if (res && res->status == 200) {
    const json m = json::parse(res->body)["choices"][0]["message"];
    a.reply = m.contains("content") && m["content"].is_string() ? m["content"].get<std::string>() : "";
  } else if (res) {
    auto j = json::parse(res->body, nullptr, false);
    if (j.is_object() && j.contains("error") && j["error"].is_object() && j["error"].contains("code") &&
        j["error"]["code"].is_string())
      a.code = j["error"]["code"].get<std::string>();
    a.retry_after = std::atoi(res->get_header_value("Retry-After").c_str());
  }
  return a;
}

// Conversation `k`: a client that takes turns as fast as it is served until `stop`,
// alternating streamed and plain answers, honouring Retry-After (up to 3 s).
void run_conversation(int k, uint16_t port, const json& bias, const std::atomic<bool>& stop,
                      LoadOutcome& out) {
  json messages =
      json::array({{{"role", "system"}, {"content", fmt::format("Conversation {} of the load test.", k)}},
                   {{"role", "user"}, {"content", fmt::format("[c{}] turn 0", k)}}});
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(120s);
  for (int turn = 0; !stop.load(); ++turn) {
    json body = {{"messages", messages}, {"max_tokens", 8}, {"logit_bias", bias}};
    const auto s = Clock::now();
    const TurnAnswer a = turn % 2 == 1 ? streamed_turn(port, body) : plain_turn(c, body);
    const double latency = seconds_since(s);
    const bool refused = a.status == 429 || a.status == 503;
    {
      std::lock_guard lock(out.mu);
      ++out.outcomes[a.status == 200 ? "200" : fmt::format("{} {}", a.status, a.code)];
      out.worst_latency_s = std::max(out.worst_latency_s, latency);
      if (refused && a.retry_after <= 0) ++out.refusals_without_retry_after;
      if (a.status == 200) ++out.completed[static_cast<size_t>(k)];
    }
    if (a.status == 200) {
      messages.push_back({{"role", "assistant"}, {"content", a.reply}});
      messages.push_back({{"role", "user"}, {"content", fmt::format("[c{}] turn {}", k, turn + 1)}});
    } else if (refused) {
      std::this_thread::sleep_for(std::chrono::seconds(std::clamp(a.retry_after, 1, 3)));
    }
  }
}

struct BurstOutcome {
  int order_violations = 0, bursts = 0, served = 0;
};

// Per-conversation order: bursts of 3 identical requests 30 ms apart (a client that sends a
// turn again before its answer came) on one conversation with an explicit id, which goes on
// with the answer after each burst, until `stop`; those admitted must finish in the order
// they were sent. The same request again belongs to the same thread (threads.h), so the
// conversation stays one session.
void run_bursts(uint16_t port, const json& bias, const std::atomic<bool>& stop, Clock::time_point t0,
                BurstOutcome& out) {
  json messages = json::array();
  for (int b = 0; !stop.load(); ++b) {
    messages.push_back({{"role", "user"}, {"content", fmt::format("burst {}", b)}});
    const json body = {{"messages", messages}, {"max_tokens", 4}, {"logit_bias", bias}};
    std::vector<double> finished(3, -1);
    std::vector<std::string> replies(3);
    {
      std::vector<std::jthread> burst;
      for (int i = 0; i < 3; ++i) {
        burst.emplace_back([&, i] {
          httplib::Client c("127.0.0.1", port);
          c.set_read_timeout(120s);
          auto res =
              c.Post("/v1/chat/completions", {{"X-Session-Id", "ordered"}}, body.dump(), "application/json");
          if (!res || res->status != 200) return;
          finished[static_cast<size_t>(i)] = seconds_since(t0);
          const json a = json::parse(res->body, nullptr, false);
          if (a.is_object())
            replies[static_cast<size_t>(i)] = a["choices"][0]["message"].value("content", "");
        });
        std::this_thread::sleep_for(30ms);
      }
    }  // the burst's threads are joined here
    // The conversation goes on from the answer that came last (the one the session kept).
    int last_served = -1;
    for (int i = 0; i < 3; ++i) {
      if (finished[static_cast<size_t>(i)] >= 0 &&
          (last_served < 0 ||
           finished[static_cast<size_t>(i)] > finished[static_cast<size_t>(last_served)])) {
        last_served = i;
      }
    }
    if (last_served >= 0) {
      messages.push_back({{"role", "assistant"}, {"content", replies[static_cast<size_t>(last_served)]}});
    } else {
      messages.erase(messages.size() - 1);
    }
    ++out.bursts;
    double last = -1;
    for (double f : finished) {
      if (f < 0) continue;
      ++out.served;
      if (f < last) ++out.order_violations;
      last = f;
    }
    std::this_thread::sleep_for(500ms);
  }
}

// Fairness: Jain's index over the conversations' completed turns (1 = perfectly even).
double jain_index(const std::vector<int>& completed) {
  const double sum = std::accumulate(completed.begin(), completed.end(), 0.0);
  double sq = 0;
  for (int n : completed) sq += static_cast<double>(n) * n;
  return sum * sum / (static_cast<double>(completed.size()) * sq);
}

// Memory: the peak of the middle third and of the last third of the run (KiB).
std::pair<uint64_t, uint64_t> rss_peaks(const std::vector<std::pair<double, uint64_t>>& rss, double elapsed) {
  uint64_t mid_peak = 0, late_peak = 0;
  for (const auto& [t, kib] : rss) {
    if (t >= elapsed / 3 && t < 2 * elapsed / 3) mid_peak = std::max(mid_peak, kib);
    if (t >= 2 * elapsed / 3) late_peak = std::max(late_peak, kib);
  }
  return {mid_peak, late_peak};
}

TEST(UpLoadTest, ManyConversationsOnFewSlotsForMinutes) {
  KVGATE_REQUIRE_LONG_SUITE();
  const char* env = std::getenv("KVGATE_LOAD_SECONDS");
  const int duration_s = env ? std::max(10, std::atoi(env)) : 180;
  const fs::path dir = fs::temp_directory_path() / fmt::format("kvgate_load_{}", ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto vocab_path = engine::vocab_file("qwen2");
  ASSERT_TRUE(vocab_path.ok());
  auto vocab = gguf::File::open(*vocab_path);
  ASSERT_TRUE(vocab.ok());
  ASSERT_TRUE(gguf::synthesize(*gguf::synth_defaults("qwen3"), &*vocab, dir / "m.gguf").ok());
  auto port = util::pick_free_port();
  ASSERT_TRUE(port.ok());
  testing::UpProcess up({(dir / "m.gguf").string(), "--listen", fmt::format("127.0.0.1:{}", *port), "--ctx",
                         "8192", "--parallel", std::to_string(kSlots), "--threads", testing::engine_threads(),
                         "--max-queue", std::to_string(kQueue), "--queue-timeout", "20s", "--log-dir",
                         (dir / "logs").string(), "--state-dir", (dir / "state").string()});
  ASSERT_TRUE(up.wait_ready()) << up.output();
  const json bias = plain_words_bias(*port);
  ASSERT_FALSE(bias.empty());

  // The clients, the bursts, and kvgate's memory every 5 s until the time is up.
  LoadOutcome load;
  BurstOutcome order;
  std::vector<std::pair<double, uint64_t>> rss;
  const auto t0 = Clock::now();
  {
    std::atomic<bool> stop{false};
    std::vector<std::jthread> clients;
    for (int k = 0; k < kConversations; ++k) {
      clients.emplace_back([&, k] { run_conversation(k, *port, bias, stop, load); });
    }
    std::jthread orderer([&] { run_bursts(*port, bias, stop, t0, order); });
    while (seconds_since(t0) < duration_s) {
      rss.emplace_back(seconds_since(t0), testing::rss_kib(up.pid()));
      std::this_thread::sleep_for(5s);
    }
    stop = true;
  }  // every thread is joined here
  const double elapsed = seconds_since(t0);
  rss.emplace_back(elapsed, testing::rss_kib(up.pid()));
  json status;
  {
    httplib::Client c("127.0.0.1", *port);
    auto res = c.Get("/kvgate/v1/status");
    ASSERT_TRUE(res && res->status == 200);
    status = json::parse(res->body);
  }
  ASSERT_TRUE(up.running()) << "kvgate must still run";

  const double sum = std::accumulate(load.completed.begin(), load.completed.end(), 0.0);
  const double jain = jain_index(load.completed);
  const auto [mid_peak, late_peak] = rss_peaks(rss, elapsed);
  json rss_series = json::array();
  for (const auto& [t, kib] : rss)
    rss_series.push_back({{"s", std::round(t)}, {"rss_mib", static_cast<double>(kib) / 1024.0}});
  json record = {
      {"fault",
       fmt::format("{} conversations + a 3-request burst on one session, on {} engine slots, for {} s "
                   "(--max-queue {}, --queue-timeout 20s)",
                   kConversations, kSlots, static_cast<int>(elapsed), kQueue)},
      {"expected",
       "no deadlock (every request answered within its bound); RSS bounded; conversations take turns; "
       "one conversation's requests served in order; beyond capacity 429 + Retry-After"},
      {"test", "UpLoadTest.ManyConversationsOnFewSlotsForMinutes"},
      {"faults", 0},
      {"client", load.outcomes},
      {"completed_turns", sum},
      {"turns_per_s", sum / elapsed},
      {"fairness_jain", jain},
      {"turns_fewest_most",
       {*std::min_element(load.completed.begin(), load.completed.end()),
        *std::max_element(load.completed.begin(), load.completed.end())}},
      {"worst_latency_s", load.worst_latency_s},
      {"order", {{"bursts", order.bursts}, {"served", order.served}, {"violations", order.order_violations}}},
      {"queue", status["queue"]},
      {"sessions", status["sessions"]},
      {"rss", rss_series},
      {"rss_mid_peak_mib", static_cast<double>(mid_peak) / 1024.0},
      {"rss_late_peak_mib", static_cast<double>(late_peak) / 1024.0},
      {"sessions_lost",
       std::max(0, (kConversations + 1) - static_cast<int>(status["sessions"].get<uint64_t>()))}};
  const bool ok = order.order_violations == 0 && load.refusals_without_retry_after == 0 &&
                  load.worst_latency_s < 60 && jain > 0.9 &&
                  late_peak <= mid_peak + mid_peak / 5 + 16 * 1024 &&
                  status["sessions"] == kConversations + 1;
  record["result"] = ok ? "pass" : "fail";
  testing::record_reliability("load", record);
  std::printf("%s\n", record.dump(2).c_str());
  EXPECT_EQ(order.order_violations, 0);
  EXPECT_EQ(load.refusals_without_retry_after, 0);
  EXPECT_LT(load.worst_latency_s, 60) << "no request waits past the queue time-out plus its own work";
  EXPECT_GT(jain, 0.9);
  EXPECT_LE(late_peak, mid_peak + mid_peak / 5 + 16 * 1024) << rss_series.dump();
  EXPECT_EQ(status["sessions"], kConversations + 1) << "every conversation stayed one session";
  EXPECT_GT(load.outcomes["200"], kConversations * 5);
  up.kill9();  // the destructor would stop it anyway; the state directory goes with the test
  up.wait_exit();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kvgate::cli
