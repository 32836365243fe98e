#include "gateway/admission.h"

#include <atomic>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace kvgate::gateway {
namespace {

using namespace std::chrono_literals;

Admission::Ticket take(Admission& a, const std::string& key) {
  auto r = a.enter(key);
  EXPECT_TRUE(r.ok()) << r.error().message;
  return std::move(r).value();
}

// Starts a thread that enters with `key`, records the admission order, holds its place until
// `release` is set. Declared after the Admission and the tickets it waits behind, so that a
// failed assertion, which leaves the test early, still ends the thread: the destructor lets go
// of the place and joins (a thread still queued gives up at the queue's max_wait).
struct Waiter {
  std::thread thread;
  std::atomic<bool> admitted{false};
  std::atomic<bool> release{false};

  Waiter() = default;
  Waiter(const Waiter&) = delete;
  Waiter& operator=(const Waiter&) = delete;
  ~Waiter() { finish(); }
  void finish() {
    release = true;
    if (thread.joinable()) thread.join();
  }
};

void start(Waiter& w, Admission& a, const std::string& key, std::mutex& mu, std::vector<std::string>& order) {
  w.thread = std::thread([&w, &a, &mu, &order, key] {
    auto r = a.enter(key);
    if (!r.ok()) return;
    {
      std::lock_guard lock(mu);
      order.push_back(key);
    }
    w.admitted = true;
    while (!w.release.load()) std::this_thread::sleep_for(1ms);
  });
}

// Polls until `done` holds or 10 s passed (generous: sanitizer builds on a loaded machine
// schedule threads late; the tests judge order and bounds, not speed).
template <typename F>
void wait_until(F done) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!done() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
}

void wait_waiting(Admission& a, size_t n) {
  wait_until([&] { return a.stats().waiting == n; });
  ASSERT_EQ(a.stats().waiting, n);
}

TEST(AdmissionTest, SessionsTakeTurnsAndKeepTheirOwnOrder) {
  Admission a({.max_active = 1, .max_waiting = 10, .max_wait = 10s});
  auto first = take(a, "A");
  std::mutex mu;
  std::vector<std::string> order;
  Waiter a2, b1, a3, c1;
  // Arrivals: A2, B1, A3, C1 (each queued before the next starts).
  start(a2, a, "A", mu, order);
  wait_waiting(a, 1);
  start(b1, a, "B", mu, order);
  wait_waiting(a, 2);
  start(a3, a, "A", mu, order);
  wait_waiting(a, 3);
  start(c1, a, "C", mu, order);
  wait_waiting(a, 4);
  first.release();
  for (Waiter* w : {&b1, &c1, &a2, &a3}) {
    wait_until([w] { return w->admitted.load(); });
    ASSERT_TRUE(w->admitted);
    EXPECT_EQ(a.stats().active, 1u);
    w->finish();
  }
  // A was just served: B and C (never served) go first, in arrival order; then A's requests
  // in theirs.
  EXPECT_EQ(order, (std::vector<std::string>{"B", "C", "A", "A"}));
  EXPECT_EQ(a.stats().admitted, 5u);
}

TEST(AdmissionTest, ABusySessionDoesNotBlockOthers) {
  Admission a({.max_active = 2, .max_waiting = 10, .max_wait = 10s});
  auto a1 = take(a, "A");
  std::mutex mu;
  std::vector<std::string> order;
  Waiter a2;
  start(a2, a, "A", mu, order);
  wait_waiting(a, 1);
  // B arrives after A2 but A is busy: B takes the free place at once.
  auto b1 = take(a, "B");
  EXPECT_FALSE(a2.admitted);
  EXPECT_EQ(a.stats().active, 2u);
  a1.release();
  wait_until([&a2] { return a2.admitted.load(); });
  EXPECT_TRUE(a2.admitted);
  a2.finish();
}

TEST(AdmissionTest, FullQueueIsRefusedAtOnceWithRetryAfter) {
  Admission a({.max_active = 1, .max_waiting = 2, .max_waiting_per_key = 8, .max_wait = 10s});
  auto held = take(a, "X");
  std::mutex mu;
  std::vector<std::string> order;
  Waiter w1, w2;
  start(w1, a, "A", mu, order);
  wait_waiting(a, 1);  // w1 queued before w2: the loop below expects them in this order
  start(w2, a, "B", mu, order);
  wait_waiting(a, 2);
  const auto t0 = std::chrono::steady_clock::now();
  auto r = a.enter("C");
  ASSERT_FALSE(r.ok());
  const auto& refusal = r.error();
  EXPECT_EQ(refusal.reason, Admission::Refusal::Reason::kQueueFull);
  EXPECT_STREQ(refusal.code(), "queue_full");
  EXPECT_GE(refusal.retry_after_s, 1);
  EXPECT_LE(refusal.retry_after_s, 60);
  // At once: not after waiting for a place (max_wait is 10 s). The bound leaves a loaded
  // machine its slowness; only a refusal that waited can reach it.
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  EXPECT_EQ(a.stats().refused_queue_full, 1u);
  held.release();
  for (Waiter* w : {&w1, &w2}) {
    wait_until([w] { return w->admitted.load(); });
    w->finish();
  }
}

TEST(AdmissionTest, OneSessionCannotFillTheQueue) {
  Admission a({.max_active = 1, .max_waiting = 10, .max_waiting_per_key = 2, .max_wait = 10s});
  auto held = take(a, "A");
  std::mutex mu;
  std::vector<std::string> order;
  Waiter w1, w2;
  start(w1, a, "A", mu, order);
  wait_waiting(a, 1);  // w1 queued before w2: the loop below expects them in this order
  start(w2, a, "A", mu, order);
  wait_waiting(a, 2);
  auto r = a.enter("A");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().reason, Admission::Refusal::Reason::kKeyQueueFull);
  // Another session still gets in line.
  Waiter b;
  start(b, a, "B", mu, order);
  wait_waiting(a, 3);
  held.release();
  // A was just served: B goes first, then A's two in their order.
  for (Waiter* w : {&b, &w1, &w2}) {
    wait_until([w] { return w->admitted.load(); });
    ASSERT_TRUE(w->admitted);
    w->finish();
  }
  EXPECT_EQ(order, (std::vector<std::string>{"B", "A", "A"}));
}

TEST(AdmissionTest, WaitIsBoundedAndAGoneClientLeavesTheQueue) {
  Admission a({.max_active = 1, .max_waiting = 10, .max_wait = 150ms});
  auto held = take(a, "A");
  const auto t0 = std::chrono::steady_clock::now();
  auto r = a.enter("B");
  const auto waited = std::chrono::steady_clock::now() - t0;
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().reason, Admission::Refusal::Reason::kTimeout);
  EXPECT_GE(waited, 150ms);
  EXPECT_LT(waited, 10s);  // bounded: a loaded machine wakes the waiter late, never this late
  EXPECT_EQ(a.stats().waiting, 0u);

  std::atomic<bool> gone{false};
  std::jthread t([&] {
    std::this_thread::sleep_for(50ms);
    gone = true;
  });
  Admission b({.max_active = 1, .max_waiting = 10, .max_wait = 10s});
  auto held_b = take(b, "A");
  auto r2 = b.enter("B", [&] { return gone.load(); });
  t.join();
  ASSERT_FALSE(r2.ok());
  EXPECT_EQ(r2.error().reason, Admission::Refusal::Reason::kClientGone);
  EXPECT_EQ(b.stats().waiting, 0u);
  EXPECT_EQ(b.stats().client_gone, 1u);
}

TEST(AdmissionTest, ManyThreadsNeverExceedTheBound) {
  Admission a({.max_active = 3, .max_waiting = 1000, .max_wait = 30s});
  std::atomic<int> inside{0};
  std::atomic<int> peak{0};
  std::vector<std::jthread> threads;
  for (int i = 0; i < 40; ++i) {
    threads.emplace_back([&, i] {
      for (int k = 0; k < 20; ++k) {
        auto r = a.enter("s" + std::to_string(i % 7));
        ASSERT_TRUE(r.ok());
        const int now = ++inside;
        int p = peak.load();
        while (now > p && !peak.compare_exchange_weak(p, now)) {
        }
        std::this_thread::yield();
        --inside;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LE(peak.load(), 3);
  EXPECT_EQ(a.stats().admitted, 800u);
  EXPECT_EQ(a.stats().active, 0u);
  EXPECT_EQ(a.stats().waiting, 0u);
}

}  // namespace
}  // namespace kvgate::gateway
