#include "session/session.h"

#include <gtest/gtest.h>

#include "session/normalize.h"

namespace kvgate::session {
namespace {

using nlohmann::json;

json convo(int turns, const std::string& topic = "a") {
  json m = json::array({{{"role", "system"}, {"content", "Current time: 2026-11-29 10:00:00\nbe helpful"}}});
  for (int i = 0; i < turns; ++i) {
    m.push_back({{"role", "user"}, {"content", topic + " question " + std::to_string(i)}});
    m.push_back({{"role", "assistant"}, {"content", topic + " answer " + std::to_string(i)}});
  }
  return m;
}

TEST(SessionTableTest, RecognisesContinuationByPrefix) {
  SessionTable t;
  json first = convo(0);
  first.push_back({{"role", "user"}, {"content", "a question 0"}});
  auto m1 = t.find_or_create(chain_hashes(first), std::nullopt);
  EXPECT_TRUE(m1.created);
  EXPECT_EQ(m1.how, "new");
  // After the reply, the stored chain includes it.
  json seen = first;
  seen.push_back({{"role", "assistant"}, {"content", "a answer 0"}});
  t.update_chain(m1.session, chain_hashes(seen), first.size());

  json second = seen;
  second[0]["content"] = "Current time: 2026-11-29 10:05:13\nbe helpful";  // the clock moved
  second.push_back({{"role", "user"}, {"content", "a question 1"}});
  auto m2 = t.find_or_create(chain_hashes(second), std::nullopt);
  EXPECT_FALSE(m2.created);
  EXPECT_EQ(m2.session, m1.session);
  EXPECT_EQ(m2.how, "prefix");
  EXPECT_EQ(m2.matched_messages, seen.size());

  // A retry of the first request (reply discarded by the client) is the same session too.
  auto retry = t.find_or_create(chain_hashes(first), std::nullopt);
  EXPECT_EQ(retry.session, m1.session);
  EXPECT_EQ(retry.matched_messages, first.size());

  // A different conversation is a different session.
  json other = convo(1, "b");
  auto m3 = t.find_or_create(chain_hashes(other), std::nullopt);
  EXPECT_TRUE(m3.created);
  EXPECT_NE(m3.session, m1.session);
}

TEST(SessionTableTest, AStoreKeyASessionInMemoryNoLongerHasIsIgnored) {
  SessionTable t;
  json a = convo(1, "a");
  auto m = t.find_or_create(chain_hashes(a), std::nullopt);
  t.update_chain(m.session, chain_hashes(a), a.size());
  // The store still names this session for the end of an older chain (its save has not
  // happened).
  const uint64_t stale = scoped_key(Session::kOpenScope, chain_hashes(convo(2, "b")).back());
  const std::string id = m.session->id;
  t.set_loader({.find = [stale, id](uint64_t key) -> std::optional<std::string> {
                  return key == stale ? std::optional<std::string>(id) : std::nullopt;
                },
                .load = [](const std::string&) -> std::shared_ptr<Session> { return nullptr; }});
  json b = convo(2, "b");
  b.push_back({{"role", "user"}, {"content", "b question 2"}});
  auto r = t.find_or_create(chain_hashes(b), std::nullopt);
  EXPECT_NE(r.session, m.session) << "the session does not hold that conversation";
  EXPECT_EQ(r.how, "new");
}

TEST(SessionTableTest, ExplicitIdWins) {
  SessionTable t;
  auto a = t.find_or_create(chain_hashes(convo(1)), std::string("agent-7"));
  EXPECT_TRUE(a.created);
  EXPECT_EQ(a.session->id, scoped_session_id(Session::kOpenScope, "agent-7"));
  EXPECT_TRUE(a.session->explicit_id);
  t.update_chain(a.session, chain_hashes(convo(1)), 3);
  // Same messages, other explicit id: another session.
  auto b = t.find_or_create(chain_hashes(convo(2)), std::string("agent-8"));
  EXPECT_NE(a.session, b.session);
  auto again = t.find_or_create(chain_hashes(convo(2)), std::string("agent-7"), "user");
  EXPECT_EQ(again.session, a.session);
  EXPECT_EQ(again.how, "user");
  EXPECT_EQ(again.matched_messages, 3U);
}

TEST(SessionTableTest, LruEvictionKeepsBusySessions) {
  SessionTable t(3);
  std::vector<std::shared_ptr<Session>> held;
  for (int i = 0; i < 3; ++i) {
    auto m = t.find_or_create(chain_hashes(convo(1, "t" + std::to_string(i))), std::nullopt);
    t.update_chain(m.session, chain_hashes(convo(1, "t" + std::to_string(i))), 3);
  }
  EXPECT_EQ(t.size(), 3U);
  // The oldest (t0) is idle and goes when a 4th arrives.
  auto m4 = t.find_or_create(chain_hashes(convo(1, "t3")), std::nullopt);
  EXPECT_EQ(t.size(), 3U);
  EXPECT_EQ(t.evictions(), 1U);
  auto t0 = t.find_or_create(chain_hashes(convo(2, "t0")), std::nullopt);
  EXPECT_TRUE(t0.created);  // its history was forgotten
  // A session held by a running request is not evicted even when it is the oldest.
  SessionTable u(1);
  auto busy = u.find_or_create(chain_hashes(convo(1, "x")), std::nullopt);
  std::lock_guard turn(busy.session->turn);
  auto other = u.find_or_create(chain_hashes(convo(1, "y")), std::nullopt);
  EXPECT_EQ(u.size(), 2U);
  EXPECT_NE(u.get(busy.session->id, Session::kOpenScope), nullptr);
}

TEST(SlotPoolTest, PinsSessionsAndReassignsLeastRecentlyUsed) {
  SlotPool p(2);
  auto [a, a_new] = p.acquire("a");
  auto [b, b_new] = p.acquire("b");
  EXPECT_TRUE(a_new);
  EXPECT_TRUE(b_new);
  EXPECT_NE(a, b);
  EXPECT_EQ(p.acquire("a"), std::make_pair(a, false));
  auto [c, c_new] = p.acquire("c");  // b is the least recently used
  EXPECT_TRUE(c_new);
  EXPECT_EQ(c, b);
  EXPECT_EQ(p.acquire("a").first, a);
}

}  // namespace
}  // namespace kvgate::session
