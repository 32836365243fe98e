#include "session/session_store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include <fmt/format.h>

namespace kvgate::session {
namespace {

using nlohmann::json;

std::filesystem::path temp_db(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("kvgate_store_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto p = dir / name;
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(p.string() + suffix);
  return p;
}

StoredSession sample(const std::string& id, int n) {
  return {.id = id, .state = {{"n", n}, {"text", "汉字 and \"quotes\""}}, .counters = {{"requests", n}}, .slot = 1,
          .created = 100, .last_used = 200 + n};
}

TEST(SessionStoreTest, SaveLoadFindAndReplaceKeys) {
  auto path = temp_db("a.db");
  auto store = SessionStore::open(path);
  ASSERT_TRUE(store.ok()) << store.error().message();
  ASSERT_TRUE((*store)->save(sample("s1", 1), {11, 12}, {{{"ts", 5}, {"level", "L2"}}}).ok());
  auto loaded = (*store)->load("s1");
  ASSERT_TRUE(loaded.ok());
  ASSERT_TRUE(loaded->has_value());
  EXPECT_EQ((**loaded).state["text"], "汉字 and \"quotes\"");
  EXPECT_EQ((**loaded).slot, 1);
  EXPECT_EQ(*(*store)->find_by_key(12), std::optional<std::string>("s1"));
  // Keys are replaced, compactions appended.
  ASSERT_TRUE((*store)->save(sample("s1", 2), {13, 0xffffffffffffffffULL}, {{{"ts", 6}, {"level", "L3"}}}).ok());
  EXPECT_EQ(*(*store)->find_by_key(12), std::nullopt);
  EXPECT_EQ(*(*store)->find_by_key(0xffffffffffffffffULL), std::optional<std::string>("s1"));
  auto history = (*store)->compactions("s1");
  ASSERT_TRUE(history.ok());
  ASSERT_EQ(history->size(), 2U);
  EXPECT_EQ((*history)[1]["level"], "L3");
  EXPECT_EQ(*(*store)->count(), 1U);
  ASSERT_TRUE((*store)->remove("s1").ok());
  EXPECT_EQ(*(*store)->find_by_key(13), std::nullopt);  // keys go with the session
  EXPECT_FALSE((*(*store)->load("s1")).has_value());
}

TEST(SessionStoreTest, ResponsesKeepTheirParentAndStayWithinByteBudgetsPerScopeAndInAll) {
  auto path = temp_db("response_budget.db");
  auto store = SessionStore::open(path);
  ASSERT_TRUE(store.ok()) << store.error().message();
  const ResponseBudget budget{.keep = 100, .scope_bytes = 3000, .total_bytes = 5000};
  auto put = [&](const std::string& id, const std::string& scope) {
    StoredResponse r{.scope = scope, .created = 1, .response = std::string(990, 'r'), .messages = "[]", .parent = "p"};
    ASSERT_EQ(r.bytes(), 993u);
    ASSERT_TRUE((*store)->save_response(id, r, budget).ok());
  };
  for (int i = 0; i < 4; ++i) put(fmt::format("a{}", i), "A");  // 3 of A fit its 3,000 bytes
  EXPECT_FALSE((*(*store)->load_response("a0")).has_value());
  EXPECT_EQ((*(*store)->load_response("a1"))->parent, "p");
  for (int i = 0; i < 3; ++i) put(fmt::format("b{}", i), "B");  // 5 of all fit the 5,000
  EXPECT_FALSE((*(*store)->load_response("a1")).has_value());
  EXPECT_TRUE((*(*store)->load_response("a2")).has_value());
  EXPECT_TRUE((*(*store)->load_response("b0")).has_value());
  EXPECT_TRUE((*(*store)->load_response("b2")).has_value());
}

TEST(SessionStoreTest, RetentionRemovesOldSessionsThenAllButTheNewestWithTheirKeys) {
  auto path = temp_db("retention.db");
  auto store = SessionStore::open(path);
  ASSERT_TRUE(store.ok()) << store.error().message();
  for (int n = 0; n < 10; ++n) {  // last used at 200..209
    ASSERT_TRUE((*store)->save(sample(fmt::format("s{}", n), n), {static_cast<uint64_t>(1000 + n)},
                               {{{"ts", n}, {"level", "L1"}}}).ok());
  }
  ASSERT_TRUE((*store)->save_response("resp_old", {.scope = "open", .created = 150, .response = "{}", .messages = "[]"},
                                      {.keep = 100}).ok());
  ASSERT_TRUE((*store)->save_response("resp_new", {.scope = "open", .created = 205, .response = "{}", .messages = "[]"},
                                      {.keep = 100}).ok());
  auto removed = (*store)->prune(203, 0);  // by age: s0..s2 and the response made at 150
  ASSERT_TRUE(removed.ok()) << removed.error().message();
  EXPECT_EQ(*removed, 3u);
  EXPECT_EQ(*(*store)->count(), 7u);
  EXPECT_EQ(*(*store)->find_by_key(1002), std::nullopt);
  EXPECT_FALSE((*(*store)->load_response("resp_old")).has_value());
  EXPECT_TRUE((*(*store)->load_response("resp_new")).has_value());
  removed = (*store)->prune(0, 4);  // by count: the four most recently used stay
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(*removed, 3u);
  EXPECT_EQ(*(*store)->count(), 4u);
  EXPECT_FALSE((*(*store)->load("s5")).has_value());
  EXPECT_TRUE((*(*store)->load("s6")).has_value());
  EXPECT_EQ(*(*store)->find_by_key(1006), std::optional<std::string>("s6"));
  EXPECT_TRUE((*store)->compactions("s5")->empty());
  EXPECT_EQ(*(*store)->prune(0, 0), 0u);  // no bounds: nothing goes
  EXPECT_EQ(*(*store)->count(), 4u);
}

TEST(SessionStoreTest, ResponsesAreKeptReopenedAndPrunedOldestFirst) {
  auto path = temp_db("responses.db");
  {
    auto store = SessionStore::open(path);
    ASSERT_TRUE(store.ok()) << store.error().message();
    for (int i = 1; i <= 5; ++i) {
      const StoredResponse r{.scope = "k1", .created = 1000 + i, .response = fmt::format("{{\"n\":{}}}", i),
                             .messages = "[]"};
      ASSERT_TRUE((*store)->save_response(fmt::format("resp_{}", i), r, {.keep = 3}).ok());
    }
  }
  auto store = SessionStore::open(path);  // a restart
  ASSERT_TRUE(store.ok());
  for (int i = 1; i <= 2; ++i) EXPECT_FALSE(*(*store)->load_response(fmt::format("resp_{}", i))) << i;
  for (int i = 3; i <= 5; ++i) {
    auto r = (*store)->load_response(fmt::format("resp_{}", i));
    ASSERT_TRUE(r.ok() && r->has_value()) << i;
    EXPECT_EQ((**r).scope, "k1");
    EXPECT_EQ((**r).created, 1000 + i);
    EXPECT_EQ(json::parse((**r).response)["n"], i);
  }
}

TEST(SessionStoreTest, SurvivesKillMinus9OfTheWriter) {
  auto path = temp_db("killed.db");
  // A child process saves a session and is killed right after save() returned.
  const pid_t pid = ::fork();
  if (pid == 0) {
    auto store = SessionStore::open(path);
    if (!store.ok() || !(*store)->save(sample("durable", 7), {77}).ok()) ::_exit(1);
    ::kill(::getpid(), SIGKILL);
    ::_exit(2);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the writer failed before being killed";
  auto store = SessionStore::open(path);
  ASSERT_TRUE(store.ok()) << store.error().message();
  auto loaded = (*store)->load("durable");
  ASSERT_TRUE(loaded.ok() && loaded->has_value());
  EXPECT_EQ((**loaded).state["n"], 7);
  EXPECT_EQ(*(*store)->find_by_key(77), std::optional<std::string>("durable"));
}

TEST(SessionStoreTest, CorruptFileIsAClearError) {
  auto path = temp_db("corrupt.db");
  {
    std::ofstream f(path, std::ios::binary);
    f << std::string(8192, 'x');
  }
  auto store = SessionStore::open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.error().message().find(path.string()), std::string::npos);
  EXPECT_NE(store.error().message().find("move it away"), std::string::npos) << store.error().message();
  // Nothing was silently recreated.
  std::ifstream f(path, std::ios::binary);
  std::string head(16, '\0');
  f.read(head.data(), 16);
  EXPECT_EQ(head, std::string(16, 'x'));
}

TEST(SessionStoreTest, NewerSchemaIsRefused) {
  auto path = temp_db("newer.db");
  ASSERT_TRUE(SessionStore::open(path).ok());
  sqlite3* db = nullptr;
  sqlite3_open(path.c_str(), &db);
  sqlite3_exec(db, "UPDATE meta SET value='99' WHERE key='schema_version'", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  auto store = SessionStore::open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.error().message().find("schema version 99"), std::string::npos);
}

TEST(SessionStoreTest, LockedDatabaseFailsSaveWithoutLosingCommittedState) {
  auto path = temp_db("locked.db");
  auto store = SessionStore::open(path);
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->save(sample("kept", 1), {1}).ok());
  sqlite3* other = nullptr;
  sqlite3_open(path.c_str(), &other);
  ASSERT_EQ(sqlite3_exec(other, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr), SQLITE_OK);
  auto st = (*store)->save(sample("kept", 2), {2});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("locked"), std::string::npos) << st.error().message();
  sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(other);
  auto loaded = (*store)->load("kept");
  ASSERT_TRUE(loaded.ok() && loaded->has_value());
  EXPECT_EQ((**loaded).state["n"], 1);  // the committed state, intact
  EXPECT_TRUE((*store)->save(sample("kept", 3), {3}).ok());  // and the store works again
}

}  // namespace
}  // namespace kvgate::session
