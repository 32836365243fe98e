#include "fleet/router.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace kvgate::gateway {
namespace {

using namespace std::chrono_literals;

const SteadyTime t0{};

std::vector<Router::Upstream> named(std::vector<std::string> names) {
  std::vector<Router::Upstream> out;
  for (std::string& n : names) out.push_back({std::move(n)});
  return out;
}

std::string key(int i) { return "session-" + std::to_string(i); }

size_t place(Router& r, const std::string& conversation) {
  const auto p = r.place(conversation);
  EXPECT_TRUE(p.has_value()) << conversation;
  return p ? p->upstream : 0;
}

std::vector<size_t> loads(const Router& r) {
  std::vector<size_t> out;
  for (const auto& u : r.stats()) out.push_back(u.pinned);
  return out;
}

// The bound of rule 2 once `total` conversations are placed on `n` equal upstreams.
size_t bound(double c, size_t total, size_t n) {
  return static_cast<size_t>(std::ceil(c * static_cast<double>(total) / static_cast<double>(n)));
}

void take_down(Router& r, size_t upstream, SteadyTime now) {
  r.report_failure(upstream, now);
  r.report_failure(upstream, now);
  ASSERT_FALSE(r.up(upstream));
}

TEST(RouterTest, AConversationStaysOnItsUpstream) {
  Router r(named({"a", "b", "c"}));
  for (int i = 0; i < 50; ++i) {
    const auto first = r.place(key(i));
    ASSERT_TRUE(first);
    EXPECT_TRUE(first->is_new);
    for (int call = 0; call < 20; ++call) {
      const auto again = r.place(key(i));
      ASSERT_TRUE(again);
      EXPECT_EQ(again->upstream, first->upstream);
      EXPECT_FALSE(again->is_new);
      EXPECT_FALSE(again->moved());
    }
    EXPECT_EQ(r.pinned(key(i)), first->upstream);
  }
}

TEST(RouterTest, NewConversationsSpreadWithinTheBoundAtEveryStep) {
  Router r(named({"a", "b", "c"}));
  for (int i = 0; i < 300; ++i) {
    place(r, key(i));
    const auto l = loads(r);
    ASSERT_LE(*std::max_element(l.begin(), l.end()), bound(1.25, static_cast<size_t>(i + 1), 3)) << i;
  }
  for (size_t load : loads(r)) {
    EXPECT_LE(load, 125u);
    EXPECT_GT(load, 0u);
  }
}

TEST(RouterTest, NewConversationsGoToTheLeastLoadedWhenTheOthersAreFull) {
  // Two upstreams at c = 1: the bound ceil((L + 1) / 2) forces strict alternation of fill.
  Router r(named({"a", "b"}), {.load_factor = 1.0});
  for (int i = 0; i < 100; ++i) {
    place(r, key(i));
    const auto l = loads(r);
    ASSERT_LE(std::max(l[0], l[1]) - std::min(l[0], l[1]), 1u) << i;
  }
}

TEST(RouterTest, PlacementDoesNotDependOnTheOrderOfUpstreams) {
  // A large load factor: the bound never triggers, so only the ring decides.
  Router forward(named({"a", "b", "c", "d"}), {.load_factor = 100});
  Router backward(named({"d", "c", "b", "a"}), {.load_factor = 100});
  const auto fs = forward.stats();
  const auto bs = backward.stats();
  for (int i = 0; i < 500; ++i) {
    EXPECT_EQ(fs[place(forward, key(i))].name, bs[place(backward, key(i))].name) << key(i);
  }
}

TEST(RouterTest, AddingAnUpstreamChangesFewFirstChoices) {
  Router three(named({"a", "b", "c"}), {.load_factor = 100});
  Router four(named({"a", "b", "c", "d"}), {.load_factor = 100});
  int changed = 0, to_new = 0;
  for (int i = 0; i < 1000; ++i) {
    const size_t before = place(three, key(i));
    const size_t after = place(four, key(i));
    if (before != after) ++changed;
    if (after == 3) ++to_new;
  }
  // Consistent hashing: only the keys the new upstream takes change (about 1/4).
  EXPECT_EQ(changed, to_new);
  EXPECT_LT(changed, 400);
  EXPECT_GT(changed, 100);
}

TEST(RouterTest, FailoverMovesOnlyTheDownUpstreamsConversations) {
  Router r(named({"a", "b", "c"}));
  std::vector<size_t> before;
  for (int i = 0; i < 300; ++i) before.push_back(place(r, key(i)));
  take_down(r, 1, t0);
  for (int i = 0; i < 300; ++i) {
    const auto p = r.place(key(i));
    ASSERT_TRUE(p);
    EXPECT_FALSE(p->is_new);
    if (before[static_cast<size_t>(i)] == 1) {
      EXPECT_TRUE(p->moved());
      EXPECT_EQ(p->moved_from, 1u);
      EXPECT_NE(p->upstream, 1u);
    } else {
      EXPECT_FALSE(p->moved());
      EXPECT_EQ(p->upstream, before[static_cast<size_t>(i)]);
    }
    const auto l = loads(r);
    ASSERT_LE(std::max(l[0], l[2]), bound(1.25, l[0] + l[2], 2)) << i;
  }
  const auto s = r.stats();
  EXPECT_EQ(s[1].pinned, 0u);
  EXPECT_EQ(s[1].moves_out, s[0].moves_in + s[2].moves_in);
  EXPECT_GT(s[0].moves_in, 0u);
  EXPECT_GT(s[2].moves_in, 0u);
  EXPECT_EQ(s[0].pinned + s[2].pinned, 300u);
}

TEST(RouterTest, OneFailureDoesNotTakeAnUpstreamDownAndASuccessResetsTheCount) {
  Router r(named({"a", "b"}));
  r.report_failure(0, t0);
  EXPECT_TRUE(r.up(0));
  EXPECT_EQ(r.stats()[0].consecutive_failures, 1);
  r.report_success(0, t0 + 1s);
  EXPECT_EQ(r.stats()[0].consecutive_failures, 0);
  r.report_failure(0, t0 + 2s);
  EXPECT_TRUE(r.up(0));  // not two in a row
  r.report_failure(0, t0 + 3s);
  EXPECT_FALSE(r.up(0));
}

TEST(RouterTest, ADownUpstreamRejoinsOnlyAfterRejoinAfter) {
  Router r(named({"a", "b"}));
  take_down(r, 0, t0);
  r.report_success(0, t0 + 1s);
  EXPECT_FALSE(r.up(0));
  EXPECT_EQ(r.stats()[0].consecutive_failures, 0);  // a success sooner only resets the count
  r.report_success(0, t0 + 4999ms);
  EXPECT_FALSE(r.up(0));
  r.report_success(0, t0 + 5s);
  EXPECT_TRUE(r.up(0));
  EXPECT_EQ(r.stats()[0].downs, 1u);
}

TEST(RouterTest, AFlappingUpstreamStaysOutUntilItStaysQuiet) {
  Router r(named({"a", "b"}));
  take_down(r, 0, t0);
  r.report_success(0, t0 + 2s);
  r.report_failure(0, t0 + 3s);  // restarts the wait
  r.report_success(0, t0 + 6s);
  EXPECT_FALSE(r.up(0));
  r.report_success(0, t0 + 7999ms);
  EXPECT_FALSE(r.up(0));
  r.report_success(0, t0 + 8s);
  EXPECT_TRUE(r.up(0));
}

TEST(RouterTest, SetDownIsImmediate) {
  Router r(named({"a", "b"}));
  const std::string c = "conversation";
  const size_t home = place(r, c);
  r.set_down(home, t0);
  EXPECT_FALSE(r.up(home));
  const auto p = r.place(c);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->upstream, 1 - home);
  EXPECT_EQ(p->moved_from, home);
  r.set_down(home, t0 + 4s);  // died again: the wait starts again
  r.report_success(home, t0 + 5s);
  EXPECT_FALSE(r.up(home));
  r.report_success(home, t0 + 9s);
  EXPECT_TRUE(r.up(home));
}

TEST(RouterTest, AfterRejoinMovedConversationsStayAndNewOnesGoToTheRejoinedFirst) {
  Router r(named({"a", "b", "c"}));
  for (int i = 0; i < 300; ++i) place(r, key(i));
  take_down(r, 1, t0);
  std::vector<size_t> after_failover;
  for (int i = 0; i < 300; ++i) after_failover.push_back(place(r, key(i)));
  r.report_success(1, t0 + 5s);
  ASSERT_TRUE(r.up(1));
  for (int i = 0; i < 300; ++i) {
    const auto p = r.place(key(i));
    ASSERT_TRUE(p);
    EXPECT_FALSE(p->moved());
    EXPECT_EQ(p->upstream, after_failover[static_cast<size_t>(i)]);
  }
  // "b" is empty and the others are over the bound: it takes the new conversations.
  for (int i = 300; i < 320; ++i) EXPECT_EQ(place(r, key(i)), 1u) << key(i);
}

TEST(RouterTest, NoUpstreamUpGivesNoPlacementAndKeepsThePins) {
  Router r(named({"a", "b"}));
  std::vector<size_t> home;
  for (int i = 0; i < 40; ++i) home.push_back(place(r, key(i)));
  r.set_down(0, t0);
  r.set_down(1, t0);
  for (int i = 0; i < 40; ++i) {
    EXPECT_FALSE(r.place(key(i)));
    EXPECT_EQ(r.pinned(key(i)), home[static_cast<size_t>(i)]);
  }
  EXPECT_FALSE(r.place("brand-new"));
  EXPECT_FALSE(r.pinned("brand-new"));
  r.report_success(0, t0 + 5s);
  for (int i = 0; i < 40; ++i) {
    const auto p = r.place(key(i));
    ASSERT_TRUE(p);
    EXPECT_EQ(p->upstream, 0u);
    // "a"'s own conversations come back unmoved; "b"'s move to it.
    EXPECT_EQ(p->moved(), home[static_cast<size_t>(i)] == 1);
  }
}

TEST(RouterTest, ForgetUnpinsAndReducesTheLoad) {
  Router r(named({"a", "b"}));
  const size_t u = place(r, "x");
  place(r, "y");
  EXPECT_EQ(loads(r)[0] + loads(r)[1], 2u);
  r.forget("x");
  r.forget("x");  // twice: no effect
  r.forget("never-seen");
  EXPECT_FALSE(r.pinned("x"));
  EXPECT_EQ(loads(r)[0] + loads(r)[1], 1u);
  const auto again = r.place("x");
  ASSERT_TRUE(again);
  EXPECT_TRUE(again->is_new);
  EXPECT_EQ(again->upstream, u);  // same hash, loads within the bound
}

TEST(RouterTest, WeightsScaleTheBound) {
  Router r({{"big", 3}, {"small", 1}});
  for (int i = 0; i < 400; ++i) {
    place(r, key(i));
    const auto l = loads(r);
    const double m = static_cast<double>(i + 1);
    ASSERT_LE(static_cast<double>(l[0]), std::ceil(1.25 * m * 3 / 4)) << i;
    ASSERT_LE(static_cast<double>(l[1]), std::ceil(1.25 * m * 1 / 4)) << i;
  }
  const auto l = loads(r);
  EXPECT_GT(l[0], 2 * l[1]);
  EXPECT_GT(l[1], 50u);
  const auto s = r.stats();
  EXPECT_EQ(s[0].weight, 3);
}

TEST(RouterTest, ToJsonHasThePerUpstreamFigures) {
  Router r(named({"a", "b"}));
  for (int i = 0; i < 10; ++i) place(r, key(i));
  const size_t down = *r.pinned(key(0));
  take_down(r, down, t0);
  for (int i = 0; i < 10; ++i) place(r, key(i));
  const nlohmann::json j = r.to_json();
  EXPECT_EQ(j["conversations"], 10);
  EXPECT_EQ(j["load_factor"], 1.25);
  ASSERT_EQ(j["upstreams"].size(), 2u);
  const nlohmann::json& d = j["upstreams"][down];
  const nlohmann::json& o = j["upstreams"][1 - down];
  EXPECT_EQ(d["name"], down == 0 ? "a" : "b");
  EXPECT_EQ(d["up"], false);
  EXPECT_EQ(d["consecutive_failures"], 2);
  EXPECT_EQ(d["conversations"], 0);
  EXPECT_EQ(d["downs"], 1);
  EXPECT_EQ(o["up"], true);
  EXPECT_EQ(o["conversations"], 10);
  EXPECT_EQ(d["moves_out"], o["moves_in"]);
  EXPECT_EQ(d["placements"].get<int>() + o["placements"].get<int>(), 10);
  EXPECT_GT(d["moves_out"].get<int>(), 0);
}

TEST(RouterTest, CheckRejectsEmptyDuplicateAndBadWeights) {
  EXPECT_TRUE(Router::check(named({"a", "b"})).ok());
  EXPECT_FALSE(Router::check({}).ok());
  const auto dup = Router::check(named({"a", "b", "a"}));
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.error().message().find("upstream 2 (\"a\"): duplicate"), std::string::npos);
  EXPECT_FALSE(Router::check(named({"a", ""})).ok());
  EXPECT_FALSE(Router::check({{"a", 0}}).ok());
  EXPECT_FALSE(Router::check({{"a", -1}}).ok());
  EXPECT_FALSE(Router::check({{"a", std::nan("")}}).ok());
  EXPECT_FALSE(Router::check({{"a", 1001}}).ok());
}

TEST(RouterTest, OutOfRangeIndicesAndAnEmptyListAreHarmless) {
  Router r(named({"a"}));
  r.report_failure(7, t0);
  r.report_success(7, t0);
  r.set_down(7, t0);
  EXPECT_FALSE(r.up(7));
  EXPECT_TRUE(r.up(0));
  Router empty(std::vector<Router::Upstream>{});
  EXPECT_FALSE(empty.place("x"));
}

TEST(RouterTest, ConcurrentPlacesAndReportsKeepTheInvariants) {
  Router r(named({"a", "b", "c"}), {.rejoin_after = 0ms});
  std::vector<std::jthread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&r, t] {
      for (int i = 0; i < 1000; ++i) {
        const std::string k = "t" + std::to_string(t) + "-" + std::to_string(i % 200);
        r.place(k);
        const size_t u = static_cast<size_t>(i % 3);
        if (i % 7 == 0) r.report_failure(u, t0 + std::chrono::milliseconds(i));
        if (i % 5 == 0) r.report_success(u, t0 + std::chrono::milliseconds(i));
        if (i % 11 == 0) r.forget(k);
        if (i % 97 == 0) r.set_down(u, t0 + std::chrono::milliseconds(i));
      }
    });
  }
  for (std::jthread& th : threads) th.join();
  size_t pinned = 0;
  for (int t = 0; t < 4; ++t) {
    for (int i = 0; i < 200; ++i) {
      const auto u = r.pinned("t" + std::to_string(t) + "-" + std::to_string(i));
      if (!u) continue;
      ++pinned;
      EXPECT_LT(*u, 3u);
    }
  }
  const auto l = loads(r);
  EXPECT_EQ(l[0] + l[1] + l[2], pinned);
  EXPECT_EQ(r.to_json()["conversations"], pinned);
}

}  // namespace
}  // namespace kvgate::gateway
