#include "http/connection_table.h"

#include <gtest/gtest.h>

#include <vector>

namespace kvgate::http {
namespace {

using Phase = ConnectionTable::Phase;

struct Recorder {
  std::vector<int> closed;
  ConnectionTable table;
  explicit Recorder(ConnectionLimits l) : table(l, [this](int fd) { closed.push_back(fd); }) {}
};

TEST(ConnectionTableTest, UnauthenticatedPoolGivesWayOldestIdleFirstThenOldestWaitingHead) {
  Recorder r({.max_connections = 10, .max_unauthenticated = 3});
  auto a = r.table.admit(1), b = r.table.admit(2), c = r.table.admit(3);
  ASSERT_TRUE(a && b && c);
  r.table.set_phase(*b, Phase::kWorking);
  r.table.set_phase(*b, Phase::kIdle);  // b: a public request answered, now idle
  auto d = r.table.admit(4);            // the pool is full: the idle one goes first
  ASSERT_TRUE(d);
  EXPECT_EQ(r.closed, std::vector<int>{2});
  EXPECT_TRUE(r.table.evicted(*b));
  auto e = r.table.admit(5);  // no idle one: the head waited for longest (a)
  ASSERT_TRUE(e);
  EXPECT_EQ(r.closed, (std::vector<int>{2, 1}));
  EXPECT_EQ(r.table.open(), 3u);
  EXPECT_EQ(r.table.unauthenticated(), 3u);
  EXPECT_EQ(r.table.evictions(), 2u);
}

TEST(ConnectionTableTest, WorkingConnectionsAreNeverClosedForANewOne) {
  Recorder r({.max_connections = 2, .max_unauthenticated = 2});
  auto a = r.table.admit(1), b = r.table.admit(2);
  r.table.set_phase(*a, Phase::kWorking);
  r.table.set_phase(*b, Phase::kWorking);
  EXPECT_FALSE(r.table.admit(3));
  EXPECT_TRUE(r.closed.empty());
  r.table.remove(*a);
  EXPECT_TRUE(r.table.admit(3));
}

TEST(ConnectionTableTest, AuthenticatedConnectionsLeaveTheSmallPoolAndKeepTheirHead) {
  Recorder r({.max_connections = 3, .max_unauthenticated = 2});
  auto a = r.table.admit(1);
  EXPECT_TRUE(r.table.set_authenticated(*a, true));
  EXPECT_EQ(r.table.unauthenticated(), 0u);
  auto b = r.table.admit(2);
  EXPECT_TRUE(r.table.set_authenticated(*b, true));
  r.table.set_phase(*a, Phase::kHead);  // a keyed client sending its next head
  auto c = r.table.admit(3);            // unauthenticated
  ASSERT_TRUE(c);
  r.table.set_phase(*c, Phase::kWorking);
  // Full: a (authenticated, mid-head) is not cut off; b (authenticated, working) neither.
  r.table.set_phase(*b, Phase::kWorking);
  EXPECT_FALSE(r.table.admit(4));
  // Once b is idle between requests it gives way, even though it is authenticated.
  r.table.set_phase(*b, Phase::kIdle);
  EXPECT_TRUE(r.table.admit(4));
  EXPECT_EQ(r.closed, std::vector<int>{2});
}

TEST(ConnectionTableTest, A401MovesTheConnectionBackAndClosesItWhenThatPoolIsFull) {
  Recorder r({.max_connections = 4, .max_unauthenticated = 1});
  auto a = r.table.admit(1);
  EXPECT_TRUE(r.table.set_authenticated(*a, true));
  auto b = r.table.admit(2);  // holds the one unauthenticated place
  r.table.set_phase(*b, Phase::kWorking);
  EXPECT_FALSE(r.table.set_authenticated(*a, false)) << "no room in the unauthenticated pool: answer, then close";
  r.table.remove(*a);
  r.table.remove(*b);
  EXPECT_EQ(r.table.open(), 0u);
  EXPECT_EQ(r.table.unauthenticated(), 0u);
}

TEST(ConnectionTableTest, ScarceFromThreeQuartersOfTheSlots) {
  Recorder r({.max_connections = 4, .max_unauthenticated = 4});
  r.table.admit(1);
  r.table.admit(2);
  EXPECT_FALSE(r.table.scarce());
  r.table.admit(3);
  EXPECT_TRUE(r.table.scarce());
}

TEST(BodyBudgetTest, TakesUpToItsLimitAndNoMore) {
  BodyBudget b(100);
  EXPECT_TRUE(b.take(60));
  EXPECT_FALSE(b.take(41));
  EXPECT_TRUE(b.take(40));
  EXPECT_FALSE(b.take(1));
  EXPECT_FALSE(b.take(~0ULL));
  b.give_back(60);
  EXPECT_EQ(b.in_use(), 40u);
  EXPECT_TRUE(b.take(60));
}

}  // namespace
}  // namespace kvgate::http
