// Hostile clients against the HTTP edge of a keyed kvgate (Gateway + HttpServer wired as in
// `kvgate up`, a fake engine behind): idle keep-alive floods, bodies sent without a key,
// chunk extensions trickled, small protocol gaps, and a hostile-load run of 256 connections
// without a key while a keyed client holds a 20-turn conversation. Each case sends the exact
// bytes of the attack and records what it measured (docs/RELIABILITY.md).
#include <atomic>
#include <fstream>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include "testing/eventually.h"
#include "testing/fault_support.h"
#include "testing/gateway_e2e.h"
#include "util/time.h"

namespace kvgate::gateway {

using http::HttpServerOptions;

namespace {

using nlohmann::json;
using testing::eventually;
using testing::FakeConnection;
using testing::FakeEngine;
using testing::FakeRequest;
using testing::Front;
using testing::post_json;
using testing::RawConnection;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr char kKey[] = "edge-test-key";
const httplib::Headers kAuth = {{"Authorization", std::string("Bearer ") + kKey}};

GatewayOptions keyed_options() {
  GatewayOptions o;
  o.api_keys = {kKey};
  o.count_tokens = false;
  o.context_tokens = 4096;
  o.model_summaries = false;
  return o;
}

FakeEngine chat_engine() {
  return FakeEngine([](const FakeRequest& r, FakeConnection& c) {
    if (!FakeEngine::answer_basics(r, c)) FakeEngine::answer_chat(r, c);
  });
}

int status_of(const std::string& response) {
  if (response.rfind("HTTP/1.1 ", 0) != 0) return 0;
  return std::atoi(response.c_str() + 9);
}

using util::ms_since;

double mib(uint64_t kib) { return static_cast<double>(kib) / 1024.0; }

// The highest RSS of this process (server and test clients) while it lives.
class RssSampler {
 public:
  RssSampler() : before_(testing::rss_kib(::getpid())), peak_(before_) {
    thread_ = std::thread([this] {
      while (!stop_) {
        peak_ = std::max<uint64_t>(peak_, testing::rss_kib(::getpid()));
        std::this_thread::sleep_for(100ms);
      }
    });
  }
  ~RssSampler() { finish(); }
  void finish() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  uint64_t before() const { return before_; }
  uint64_t peak() const { return peak_; }

 private:
  uint64_t before_;
  std::atomic<uint64_t> peak_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Sends `total` body bytes from one reused buffer (the test's own memory stays small).
size_t upload(RawConnection& c, size_t total, std::chrono::milliseconds timeout) {
  static const std::string piece(1 << 20, 'x');
  const auto deadline = Clock::now() + timeout;
  size_t sent = 0;
  while (sent < total && Clock::now() < deadline) {
    const size_t n = std::min(piece.size(), total - sent);
    const size_t got = c.send_within(std::string_view(piece).substr(0, n), 200ms);
    sent += got;
    if (got < n) break;  // the peer stopped reading, or closed
  }
  return sent;
}

json turn_body(const json& messages) { return {{"messages", messages}, {"max_tokens", 4}}; }

TEST(EdgeAbuseTest, IdleKeepAliveFloodWithoutAKeyDoesNotLockOthersOut) {
  auto engine = chat_engine();
  Front front([&] { return engine.endpoint(); }, keyed_options());
  // 128 connections idle after a public GET /health, 128 after a request refused 401.
  std::vector<std::unique_ptr<RawConnection>> flood;
  int answered = 0;
  const auto t0 = Clock::now();
  for (int i = 0; i < 256; ++i) {
    flood.push_back(std::make_unique<RawConnection>(front.port()));
    flood.back()->send(i % 2 ? "GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n" : "GET /v1/models HTTP/1.1\r\nHost: localhost\r\n\r\n");
  }
  for (auto& c : flood) {
    const int s = status_of(c->read_all(10ms));
    answered += s == 200 || s == 401 ? 1 : 0;
  }
  // A keyed client with fresh connections meanwhile: never refused.
  int served = 0;
  double worst_ms = 0;
  for (int i = 0; i < 10; ++i) {
    httplib::Client client("127.0.0.1", front.port());
    const auto t = Clock::now();
    auto res = client.Get("/v1/models", kAuth);
    worst_ms = std::max(worst_ms, ms_since(t));
    served += res && res->status == 200 ? 1 : 0;
  }
  EXPECT_EQ(served, 10);
  // The flood's connections are closed within the idle time-out (5 s) of their request, not 75 s.
  int closed = 0;
  for (auto& c : flood) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(t0 + 8s - Clock::now());
    closed += c->closed_within(std::max(left, 1ms)) ? 1 : 0;
  }
  const double all_closed_ms = ms_since(t0);
  EXPECT_EQ(closed, 256);
  testing::record_reliability(
      "edge_idle_keepalive_flood",
      {{"fault", "256 keep-alive connections without a key, each idle after one request (GET /health, or one answered 401)"},
       {"expected", "at most max_connections/4 held without a key; the longest idle gives way to a new connection; "
                    "all closed after the idle time-out (5 s); a keyed client served throughout"},
       {"test", "EdgeAbuseTest.IdleKeepAliveFloodWithoutAKeyDoesNotLockOthersOut"},
       {"faults", 256},
       {"client", {{"200 keyed client (fresh connections)", served}, {"flood answered", answered}, {"flood closed", closed}}},
       {"measured_ms", {{"keyed_worst_latency", worst_ms}, {"flood_all_closed_after_its_start", all_closed_ms}}},
       {"evictions", front.server().evictions()},
       {"result", served == 10 && closed == 256 ? "pass" : "fail"}});
}

TEST(EdgeAbuseTest, BodiesWithoutAKeyAreNeverReadAndKeyedBodiesShareABudget) {
  auto engine = chat_engine();
  HttpServerOptions http;
  http.max_body_bytes = 64 << 20;
  http.max_body_bytes_in_flight = 96 << 20;
  Front front([&] { return engine.endpoint(); }, keyed_options(), http);
  RssSampler rss;
  // 4 parallel 60 MB uploads without a key: each answered 401 from its head, the body unread.
  std::vector<std::jthread> uploads;
  std::atomic<int> refused{0};
  std::atomic<size_t> accepted_bytes{0};
  std::vector<double> answer_ms(4);
  for (int i = 0; i < 4; ++i) {
    uploads.emplace_back([&, i] {
      RawConnection c(front.port());
      const auto t = Clock::now();
      c.send("POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
             "Content-Length: 60000000\r\n\r\n");
      accepted_bytes += upload(c, 60'000'000, 3s);
      const std::string answer = c.read_all(2s);
      answer_ms[static_cast<size_t>(i)] = ms_since(t);
      refused += status_of(answer) == 401 ? 1 : 0;
    });
  }
  for (auto& t : uploads) t.join();
  const uint64_t peak_unkeyed = rss.peak();
  EXPECT_EQ(refused.load(), 4);
  EXPECT_LT(accepted_bytes.load(), 4u * 8 * 1024 * 1024) << "at most socket buffers' worth was taken";
  // Keyed: two 40 MB bodies are held at once (80 of 96 MiB); a third is refused 503 naming the bound.
  RawConnection a(front.port()), b(front.port()), c(front.port());
  const std::string head = fmt::format(
      "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {}\r\nContent-Length: 40000000\r\n\r\n", kKey);
  a.send(head);
  b.send(head);
  upload(a, 1000, 1s);
  upload(b, 1000, 1s);
  // Both bodies are held (their budget is taken from the heads) before the third comes.
  ASSERT_TRUE(eventually([&] { return front.server().body_bytes_in_flight() == 80'000'000u; }));
  c.send(head);
  const std::string third = c.read_all(2s);
  EXPECT_EQ(status_of(third), 503) << third.substr(0, 300);
  EXPECT_NE(third.find("Retry-After"), std::string::npos);
  EXPECT_NE(third.find("budget of 100663296 bytes"), std::string::npos) << third;
  rss.finish();
  const uint64_t rss_after = testing::rss_kib(::getpid());
  EXPECT_LT(peak_unkeyed, rss.before() + 32 * 1024) << "unkeyed uploads must not be buffered";
  testing::record_reliability(
      "edge_body_before_auth",
      {{"fault", "4 parallel 60 MB uploads without a key; then 3 keyed 40 MB uploads at once against a 96 MiB budget"},
       {"expected", "401 from the head, the body never read; keyed bodies beyond the in-flight budget get 503 + "
                    "Retry-After naming it"},
       {"test", "EdgeAbuseTest.BodiesWithoutAKeyAreNeverReadAndKeyedBodiesShareABudget"},
       {"faults", 7},
       {"client", {{"401 from the head", refused.load()}, {"503 body budget", status_of(third) == 503 ? 1 : 0}}},
       {"measured_ms", {{"unkeyed_answer_worst", *std::max_element(answer_ms.begin(), answer_ms.end())}}},
       {"rss_mib", {{"before", mib(rss.before())}, {"peak_unkeyed", mib(peak_unkeyed)}, {"after", mib(rss_after)}}},
       {"result", refused == 4 && status_of(third) == 503 ? "pass" : "fail"}});
}

TEST(EdgeAbuseTest, ChunkExtensionsTrickledAreTimedOutAndSmallGapsAreClosed) {
  auto engine = chat_engine();
  HttpServerOptions http;
  http.body_grace = 1s;  // the default is 10 s; the payload rate (32 KiB/s) is the default
  Front front([&] { return engine.endpoint(); }, keyed_options(), http);
  // Chunk extensions at ~40 KiB/s carrying 40 payload bytes a second.
  RawConnection t(front.port());
  t.send(fmt::format("POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {}\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n",
                     kKey));
  const std::string chunk = "1;" + std::string(1000, 'e') + "\r\nx\r\n";
  const auto t0 = Clock::now();
  std::string answer;
  for (int i = 0; i < 400 && answer.empty(); ++i) {
    if (!t.send(chunk)) break;
    answer = t.read_all(25ms);
  }
  if (answer.empty()) answer = t.read_all(1s);
  const double trickle_ms = ms_since(t0);
  EXPECT_EQ(status_of(answer), 408) << answer.substr(0, 300);
  EXPECT_LT(trickle_ms, 4000);
  // A 10 KB method on a known path: 405 quoting at most 32 bytes of it.
  RawConnection m(front.port());
  m.send(fmt::format("{} /v1/models HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {}\r\n\r\n", std::string(10000, 'M'), kKey));
  const std::string not_allowed = m.read_all(2s);
  EXPECT_EQ(status_of(not_allowed), 405) << not_allowed.substr(0, 300);
  EXPECT_LT(not_allowed.size(), 600u) << not_allowed.substr(0, 800);
  // A duplicate Host.
  RawConnection h(front.port());
  h.send("GET /health HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n");
  const int dup_host = status_of(h.read_all(2s));
  EXPECT_EQ(dup_host, 400);
  // A TLS ClientHello: 400 at once.
  RawConnection tls(front.port());
  static constexpr char kHello[] = "\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03";
  const auto t1 = Clock::now();
  tls.send(std::string_view(kHello, sizeof kHello - 1));
  const int tls_status = status_of(tls.read_all(3s));
  const double tls_ms = ms_since(t1);
  EXPECT_EQ(tls_status, 400);
  EXPECT_LT(tls_ms, 1000);
  auto client = front.client();
  EXPECT_EQ(post_json(client, "/v1/chat/completions", turn_body(json::array({{{"role", "user"}, {"content", "hi"}}})), kAuth)
                .status,
            200);
  testing::record_reliability(
      "edge_chunked_framing_and_gaps",
      {{"fault", "chunk extensions trickled at ~40 KiB/s (1 payload byte per KiB); a 10 KB method; a duplicate Host; "
                 "a TLS ClientHello"},
       {"expected", "408 once the payload falls behind the minimum rate; 405 quoting 32 bytes of the method; 400; "
                    "400 at once"},
       {"test", "EdgeAbuseTest.ChunkExtensionsTrickledAreTimedOutAndSmallGapsAreClosed"},
       {"faults", 4},
       {"client",
        {{fmt::format("{} extension trickle", status_of(answer)), 1},
         {fmt::format("{} 10 KB method ({} bytes answered)", status_of(not_allowed), not_allowed.size()), 1},
         {fmt::format("{} duplicate Host", dup_host), 1},
         {fmt::format("{} TLS hello", tls_status), 1}}},
       {"measured_ms", {{"extension_trickle_cut_after", trickle_ms}, {"tls_hello_answered_after", tls_ms}}},
       {"result", status_of(answer) == 408 && tls_status == 400 ? "pass" : "fail"}});
}

// 256 connections without a key — idle, keep-alive idlers, trickled heads, oversized bodies —
// reconnecting as they are closed, while a keyed client holds a 20-turn conversation.
void hostile_load(std::chrono::seconds duration, const std::string& case_id) {
  auto engine = chat_engine();
  Front front([&] { return engine.endpoint(); }, keyed_options());
  RssSampler rss;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> attacks{0};
  // Joined when the case ends, however it ends (a failed assertion requests their stop).
  std::vector<std::jthread> attackers;
  for (int kind = 0; kind < 4; ++kind) {
    attackers.emplace_back([&, kind](std::stop_token ended) {
      std::vector<std::unique_ptr<RawConnection>> conns(64);
      while (!stop && !ended.stop_requested()) {
        int opened = 0;
        for (auto& c : conns) {
          if (stop || opened == 16) break;  // at most 160 new connections a second per kind
          if (c && !c->closed_now()) {
            if (kind == 2) c->send_within("X", 1ms);  // the trickled head goes on
            if (kind == 3) c->send_within(std::string(4096, 'x'), 1ms);
            continue;
          }
          c = std::make_unique<RawConnection>(front.port());
          ++opened;
          ++attacks;
          if (kind == 1) c->send("GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n");
          if (kind == 2) c->send("POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nX-Slow: ");
          if (kind == 3) c->send("POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Length: 60000000\r\n\r\n");
        }
        std::this_thread::sleep_for(100ms);
      }
    });
  }
  // The keyed conversation starts once every kind of attack is under way.
  ASSERT_TRUE(eventually([&] { return attacks.load() >= 64; }));
  httplib::Client client("127.0.0.1", front.port());
  client.set_keep_alive(true);
  client.set_read_timeout(30s);
  json messages = json::array({{{"role", "system"}, {"content", "You are terse."}}});
  std::map<std::string, int> seen;
  double worst_ms = 0;
  const auto t0 = Clock::now();
  const auto pause = std::chrono::duration_cast<std::chrono::milliseconds>(duration) / 20;
  for (int turn = 0; turn < 20; ++turn) {
    messages.push_back({{"role", "user"}, {"content", fmt::format("turn {} of the keyed conversation", turn)}});
    const auto t = Clock::now();
    auto a = post_json(client, "/v1/chat/completions", turn_body(messages), kAuth);
    worst_ms = std::max(worst_ms, ms_since(t));
    ++seen[std::to_string(a.status)];
    EXPECT_EQ(a.status, 200) << "turn " << turn << ": " << a.raw.substr(0, 300);
    if (a.status == 200) messages.push_back(a.body["choices"][0]["message"]);
    std::this_thread::sleep_until(t + pause);
  }
  const double conversation_s = ms_since(t0) / 1000;
  // A fresh keyed connection in the middle of it is served too.
  httplib::Client fresh("127.0.0.1", front.port());
  auto res = fresh.Get("/v1/models", kAuth);
  const int fresh_status = res ? res->status : 0;
  EXPECT_EQ(fresh_status, 200);
  stop = true;
  for (auto& t : attackers) t.join();
  rss.finish();
  const uint64_t growth_kib = rss.peak() - std::min(rss.peak(), rss.before());
  EXPECT_LT(growth_kib, 64u * 1024) << "RSS bound: 64 MiB over the start";
  EXPECT_EQ(engine.count("/v1/chat/completions"), 20u) << "only the keyed turns reached the engine";
  testing::record_reliability(
      case_id,
      {{"fault", fmt::format("256 connections without a key (64 idle, 64 keep-alive after GET /health, 64 trickled "
                             "heads, 64 bodies of a 60 MB Content-Length), reconnecting when closed, for {} s",
                             conversation_s)},
       {"expected", "the keyed 20-turn conversation is never refused; RSS stays within 64 MiB of the start; "
                    "nothing without a key reaches the engine"},
       {"test", case_id == "edge_hostile_load" ? "EdgeAbuseTest.HostileLoadQuick" : "EdgeAbuseTest.HostileLoadLong"},
       {"faults", attacks.load()},
       {"client", {{"keyed turns 200", seen["200"]}, {"fresh keyed connection", fresh_status}}},
       {"measured_ms", {{"keyed_worst_latency", worst_ms}}},
       {"rss_mib", {{"before", mib(rss.before())}, {"peak", mib(rss.peak())}}},
       {"evictions", front.server().evictions()},
       {"result", seen["200"] == 20 && growth_kib < 64u * 1024 ? "pass" : "fail"}});
}

TEST(EdgeAbuseTest, HostileLoadQuick) { hostile_load(3s, "edge_hostile_load"); }

TEST(EdgeAbuseTest, HostileLoadLong) {
  KVGATE_REQUIRE_LONG_SUITE();
  hostile_load(60s, "edge_hostile_load_long");
}

}  // namespace
}  // namespace kvgate::gateway
