// Faults of kvgate's state against the real `kvgate up` (the binary) serving the real pinned
// engine: the session store on a full disk, turned read-only, locked by another process; kvgate
// itself killed at random points and restarted. Each case records what clients saw for
// docs/RELIABILITY.md (testing/fault_support.h).
//
// The quick cases run with the e2e tests; the long ones need KVGATE_FAULTS=1. The store cases
// mount a small ext4 image in a private mount namespace (unshare, nsenter: root and loop
// devices); where that is not permitted they are skipped and say why.
#include <cstdlib>
#include <map>
#include <random>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sqlite3.h>

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

using testing::check_store;

// ---- the session store -----------------------------------------------------------------

TEST_F(UpFaultsTest, SessionStoreLockedByAnotherProcess) {
  auto model = synth(*gguf::synth_defaults("qwen3"));
  start(args(model));
  std::map<std::string, int> client;
  json messages = conversation("locked", 1);
  auto turn = [&](const std::string& text) {
    auto a = chat(messages);
    client[kind_of(a)]++;
    if (a.status == 200) {
      messages.push_back(a.body["choices"][0]["message"]);
      messages.push_back({{"role", "user"}, {"content", "[locked] " + text}});
    }
    return a.status;
  };
  ASSERT_EQ(turn("one"), 200);
  const fs::path db = dir_ / "state" / "sessions.db";
  // Another process (this test) takes the write lock and holds it.
  sqlite3* other = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &other), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(other, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
  const auto t0 = Clock::now();
  EXPECT_EQ(turn("two"), 200);
  EXPECT_EQ(turn("three"), 200);
  const double locked_ms = ms_since(t0) / 2;
  EXPECT_EQ(health().value("session_store", ""), "failing");
  // A new conversation meanwhile is served too (its lookups wait at most 250 ms).
  auto t1 = Clock::now();
  EXPECT_EQ(chat(conversation("newcomer", 1)).status, 200);
  const double newcomer_ms = ms_since(t1);
  sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(other);
  EXPECT_EQ(turn("four"), 200);  // saved: the whole state, turns two and three included
  EXPECT_EQ(health().value("session_store", ""), "ok");
  // kvgate is killed and started again: the conversation continues as the same session.
  up_->kill9();
  EXPECT_EQ(up_->wait_exit(), -SIGKILL);
  start(args(model));
  const size_t before = up_->events("request").size();
  EXPECT_EQ(turn("five"), 200);
  json ev = next_request_event(before);
  EXPECT_EQ(ev.value("recognised_by", ""), "prefix") << ev.dump();
  EXPECT_TRUE(ev.value("loaded", false)) << ev.dump();
  up_.reset();
  auto check = check_store(db, {"locked", "newcomer"});
  EXPECT_EQ(check.sessions, 2u);
  EXPECT_EQ(check.mixed, 0);
  EXPECT_EQ(check.messages_by_tag["locked"], 11u) << "system + 5 user turns + 5 replies: every answered turn";
  record_reliability(
      "store_locked",
      {{"fault",
        "another process holds the SQLite write lock (BEGIN IMMEDIATE) for two turns and a new "
        "conversation, then releases it; then kvgate is killed -9 and restarted"},
       {"expected",
        "answers served (a save waits 2 s, then fails: counted, /health session_store "
        "\"failing\"); the next save writes the whole state; after the restart the "
        "conversation is recognised from the store with every answered turn"},
       {"test", "UpFaultsTest.SessionStoreLockedByAnotherProcess"},
       {"faults", 3},
       {"client", client},
       {"measured_ms", {{"turn_while_locked", locked_ms}, {"new_conversation_while_locked", newcomer_ms}}},
       {"sessions_mixed", check.mixed},
       {"result", check.mixed == 0 && check.messages_by_tag["locked"] == 11u ? "pass" : "fail"}});
}

TEST_F(UpFaultsTest, SessionStoreOnAFullDiskAndTurnedReadOnly) {
  KVGATE_REQUIRE_LONG_SUITE();
  auto prefix = private_state_mount("16M");
  if (prefix.empty()) {
    record_reliability(
        "store_disk_full_read_only",
        {{"fault", "session store on a full disk, then read-only"},
         {"test", "UpFaultsTest.SessionStoreOnAFullDiskAndTurnedReadOnly"},
         {"result", "not run: mounting a loop device in a private mount namespace is not permitted here"}});
    GTEST_SKIP() << "needs root, unshare -m and loop devices";
  }
  auto model = synth(*gguf::synth_defaults("qwen3"));
  start(args(model), prefix);
  std::map<std::string, int> client;
  json messages = conversation("disk", 1);
  auto turn = [&](const std::string& text) {
    auto a = chat(messages);
    client[kind_of(a)]++;
    if (a.status == 200) {
      messages.push_back(a.body["choices"][0]["message"]);
      messages.push_back({{"role", "user"}, {"content", "[disk] " + text}});
    }
    return a.status;
  };
  ASSERT_EQ(turn("one"), 200);
  ASSERT_EQ(turn("two"), 200);
  const std::string state = (dir_ / "state").string();
  // 1. The disk fills up (a file takes every free block).
  in_namespace(fmt::format("cat /dev/zero > {}/fill", state));
  // (A few bytes may still fit in blocks the filler could not use; a page's worth does not.)
  EXPECT_NE(in_namespace(fmt::format("head -c 65536 /dev/zero > {}/probe", state)), 0) << "the disk should be full";
  EXPECT_EQ(turn("three, disk full"), 200);
  EXPECT_EQ(turn("four, disk full"), 200);
  EXPECT_EQ(health().value("session_store", ""), "failing");
  // Space comes back: the next save writes the whole state.
  in_namespace(fmt::format("rm -f {}/fill {}/probe", state, state));
  EXPECT_EQ(turn("five"), 200);
  EXPECT_EQ(health().value("session_store", ""), "ok");
  // 2. The file system turns read-only under kvgate (an ext4 error with errors=remount-ro).
  const int ro = in_namespace(
      fmt::format("echo 1 > /sys/fs/ext4/$(basename $(findmnt -no SOURCE {}))/trigger_fs_error", state));
  EXPECT_EQ(ro, 0);
  EXPECT_NE(in_namespace(fmt::format("touch {}/probe", state)), 0) << "the file system should be read-only";
  EXPECT_EQ(turn("six, read-only"), 200);
  EXPECT_EQ(health().value("session_store", ""), "failing");
  EXPECT_TRUE(up_->running());
  // kvgate is killed; it comes back on the same image (mounted again, writable): what was
  // committed before the file system turned read-only is there.
  up_->kill9();
  EXPECT_EQ(up_->wait_exit(), -SIGKILL);
  ASSERT_TRUE(wait_image_released()) << "the old engine kept the read-only mount";
  start(args(model), prefix);
  const size_t before = up_->events("request").size();
  EXPECT_EQ(turn("seven"), 200);
  json ev = next_request_event(before);
  EXPECT_EQ(ev.value("recognised_by", ""), "prefix") << ev.dump();
  EXPECT_TRUE(ev.value("loaded", false)) << ev.dump();
  const uint64_t stored_requests = [&] {
    httplib::Client c("127.0.0.1", port_);
    auto res = c.Get(("/kvgate/v1/sessions/" + ev.value("session", "")).c_str());
    return res ? json::parse(res->body).value("requests", uint64_t{0}) : 0;
  }();
  // Turns one to five were committed (five saved the whole state); six was answered while
  // read-only, seven after the restart: the session counts 5 + 1.
  EXPECT_EQ(stored_requests, 6u);
  record_reliability("store_disk_full_read_only",
                     {{"fault",
                       "session store (ext4 image in a private mount namespace) filled to the last block for "
                       "two turns; later the file system turned read-only (ext4 error, errors=remount-ro); "
                       "kvgate killed -9 and restarted on the image"},
                      {"expected",
                       "answers served from memory (saves fail: counted, /health session_store \"failing\"); "
                       "the first save after space returns writes the whole state; after the restart the "
                       "conversation is recognised with every turn committed before the fault"},
                      {"test", "UpFaultsTest.SessionStoreOnAFullDiskAndTurnedReadOnly"},
                      {"faults", 3},
                      {"client", client},
                      {"result", stored_requests == 6u ? "pass" : "fail"}});
}

// ---- kvgate itself ----------------------------------------------------------------------

// Where a turn's kill lands: none (kvgate is killed between turns, after the round), during
// the request, mid-stream after a few content events, or right after the client has its answer.
enum class Kill { kBetweenTurns, kDuringRequest, kMidStream, kAfterAnswer };
constexpr const char* kKillNames[] = {"between turns", "during a request", "mid-stream", "right after an answer"};

// Three conversations through a kvgate that is killed at random points (seeded) and
// restarted on the same state directory, and what was seen.
class RandomKills {
 public:
  RandomKills(UpFaultsTest& t, std::vector<std::string> up_args, uint32_t seed)
      : t_(t), up_args_(std::move(up_args)), rng_(seed) {
    for (const auto& tag : kTags) convs_.push_back({tag, conversation(tag, 1)});
  }

  // Turn 1 of each conversation: learns its session.
  void first_turns() {
    for (auto& c : convs_) ASSERT_EQ(take_turn(c, Kill::kBetweenTurns), 200);
    for (auto& c : convs_) ASSERT_FALSE(c.session.empty());
  }

  // Every conversation takes a turn, one of them with a kill at a random point; kvgate is
  // then killed (if still running) and started again.
  void kill_round() {
    const size_t victim = rng_() % convs_.size();
    const auto kill = static_cast<Kill>(rng_() % 4);
    kill_points_[kKillNames[static_cast<int>(kill)]]++;
    for (size_t i = 0; i < convs_.size(); ++i) {
      if (!t_.up_->running()) break;
      take_turn(convs_[i], i == victim ? kill : Kill::kBetweenTurns);
    }
    if (t_.up_->running()) t_.up_->kill9();
    EXPECT_EQ(t_.up_->wait_exit(), -SIGKILL);
    t_.start(up_args_);
  }

  // After a restart each conversation's next turn is recognised as itself from the store, and
  // the turn after that is served from the engine's cache. Each request logs one line, in
  // order: the n-th line of this process is the n-th request.
  void check_after_restart(int round) {
    size_t logged = 0;
    for (auto& c : convs_) {
      ASSERT_EQ(take_turn(c, Kill::kBetweenTurns), 200) << c.tag;
      json ev = t_.next_request_event(logged++);
      const bool same = ev.value("session", "") == c.session && ev.value("recognised_by", "") == "prefix";
      if (!same) ++lost_;
      recognised_ += same ? 1 : 0;
      EXPECT_TRUE(same) << c.tag << " round " << round << ": " << ev.dump();
      EXPECT_TRUE(ev.value("loaded", false)) << ev.dump();
    }
    for (auto& c : convs_) {
      ASSERT_EQ(take_turn(c, Kill::kBetweenTurns), 200) << c.tag;
      json ev = t_.next_request_event(logged++);
      // A rescued answer (the engine rejected its own output, docs/RESCUE.md) reports the
      // replay's usage, which has no cache figures when the engine refuses the replay's last
      // event too: such a turn says nothing about the cache either way.
      if (ev.value("rescued", false)) {
        ++rescued_turns_;
        continue;
      }
      const uint64_t prompt = ev.value("prompt_tokens", uint64_t{0});
      const uint64_t cached = ev.value("cached_tokens", uint64_t{0});
      if (cached * 10 < prompt * 6) ++not_cached_;
      EXPECT_GE(cached * 10, prompt * 6) << c.tag << ": " << ev.dump();
    }
  }

  // The store holds each conversation as the client last saw it (request + reply).
  void check_store_file(const fs::path& db) {
    check_ = check_store(db, kTags);
    EXPECT_EQ(check_.sessions, 3u);
    EXPECT_EQ(check_.mixed, 0);
    for (const auto& c : convs_) EXPECT_EQ(check_.messages_by_tag[c.tag], c.messages.size() - 1) << c.tag;
  }

  json record(int rounds, uint32_t seed) const {
    return {{"fault", fmt::format("kvgate killed -9 {} times at random points (seed {}) in 3 conversations, "
                                  "restarted each time on the same state directory",
                                  rounds, seed)},
            {"kill_points", kill_points_},
            {"expected",
             "a request cut by the kill fails at the client (connection closed), nothing else; "
             "after the restart each conversation's next turn is recognised as the same session "
             "from the store, and the turn after it is served from the engine's cache; no "
             "session lost or mixed"},
            {"test", "UpFaultsTest.KvgateKilledAtRandomPointsAndRestarted"},
            {"faults", rounds},
            {"turns", turns_},
            {"client", client_},
            {"recognised_after_restart", recognised_},
            {"not_served_from_cache", not_cached_},
            {"rescued_turns_not_judged", rescued_turns_},
            {"sessions_lost", lost_},
            {"sessions_mixed", check_.mixed},
            {"result", lost_ == 0 && check_.mixed == 0 && not_cached_ == 0 ? "pass" : "fail"}};
  }

 private:
  struct Conv {
    std::string tag;
    json messages;  // ends with the next user message
    std::string session;
    int next = 1;
    size_t sent = 0;  // messages in the last request
  };
  inline static const std::vector<std::string> kTags = {"alpha", "beta", "gamma"};

  void commit(Conv& c, const json& reply) {
    c.messages.push_back(reply);
    c.messages.push_back({{"role", "user"}, {"content", fmt::format("[{}] question {}", c.tag, c.next++)}});
  }

  // A streamed turn; kvgate is killed after a few content events.
  int streamed_turn_killed(Conv& c) {
    const size_t after = 1 + rng_() % 3;
    bool killed = false;
    auto st = stream_request(t_.port_, t_.body(c.messages, 48), {}, 60s, [&](const testing::StreamOutcome& o) {
      if (!killed && o.chunks.size() >= after) {
        t_.up_->kill9();
        killed = true;
      }
      return true;
    });
    const bool complete = st.done && !st.transport_error;
    client_[complete ? "200 completed before the kill" : "stream cut by the kill"]++;
    if (complete) commit(c, {{"role", "assistant"}, {"content", st.content}});
    return complete ? 200 : 0;
  }

  // One turn, with kvgate killed where `kill` says; the answer's status (0: cut by the kill).
  int take_turn(Conv& c, Kill kill) {
    ++turns_;
    const size_t before = t_.up_->events("request").size();
    c.sent = c.messages.size();
    if (kill == Kill::kMidStream) return streamed_turn_killed(c);
    std::jthread killer;
    if (kill == Kill::kDuringRequest) {
      const auto delay = std::chrono::milliseconds(rng_() % 400);
      killer = std::jthread([this, delay] {
        std::this_thread::sleep_for(delay);
        t_.up_->kill9();
      });
    }
    auto a = t_.chat(c.messages);
    if (killer.joinable()) killer.join();
    client_[a.status == 200 ? "200" : "connection broken by the kill"]++;
    if (a.status == 200) {
      commit(c, a.body["choices"][0]["message"]);
      if (c.session.empty()) c.session = t_.next_request_event(before, c.sent).value("session", "");
    }
    if (kill == Kill::kAfterAnswer) t_.up_->kill9();
    return a.status;
  }

  UpFaultsTest& t_;
  std::vector<std::string> up_args_;
  std::mt19937 rng_;
  std::vector<Conv> convs_;
  std::map<std::string, int> client_;
  std::map<std::string, int> kill_points_;
  int lost_ = 0, not_cached_ = 0, turns_ = 0, recognised_ = 0, rescued_turns_ = 0;
  testing::StoreCheck check_;
};

TEST_F(UpFaultsTest, KvgateKilledAtRandomPointsAndRestarted) {
  KVGATE_REQUIRE_LONG_SUITE();
  auto model = synth(*gguf::synth_defaults("qwen3"));
  // A slot per conversation, so each keeps its cache while the others take their turns.
  const auto up_args = args(model, {"--parallel", "3", "--ctx", "8192"});
  start(up_args);
  const char* seed_env = std::getenv("KVGATE_FAULT_SEED");
  const uint32_t seed = seed_env ? static_cast<uint32_t>(std::strtoul(seed_env, nullptr, 10)) : 20261130u;
  RandomKills kills(*this, up_args, seed);
  ASSERT_NO_FATAL_FAILURE(kills.first_turns());
  const int rounds = 10;
  for (int round = 0; round < rounds; ++round) {
    ASSERT_NO_FATAL_FAILURE(kills.kill_round());
    ASSERT_NO_FATAL_FAILURE(kills.check_after_restart(round));
  }
  up_.reset();
  kills.check_store_file(dir_ / "state" / "sessions.db");
  record_reliability("kvgate_sigkill_restart", kills.record(rounds, seed));
}

}  // namespace
}  // namespace kvgate::cli
