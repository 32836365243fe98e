#include "gateway/response_store.h"

#include <filesystem>

#include <gtest/gtest.h>

namespace kvgate::gateway {
namespace {

session::StoredResponse made_by(const std::string& scope, const std::string& text) {
  return {.scope = scope, .created = 1, .response = text, .messages = "[]"};
}

TEST(ResponseStoreTest, AResponseIsOnlyVisibleToTheScopeThatMadeIt) {
  ResponseStore store;
  store.put("resp_a", made_by("k1", "{\"a\":1}"));
  ASSERT_TRUE(store.get("resp_a", "k1"));
  EXPECT_EQ(store.get("resp_a", "k1")->response, "{\"a\":1}");
  EXPECT_FALSE(store.get("resp_a", "k2"));
  EXPECT_FALSE(store.get("resp_b", "k1"));
}

TEST(ResponseStoreTest, MemoryKeepsTheNewestAndTheStoreKeepsTheRest) {
  ResponseStore memory_only({.max_in_memory = 2});
  for (int i = 0; i < 4; ++i) memory_only.put("r" + std::to_string(i), made_by("k", std::to_string(i)));
  EXPECT_FALSE(memory_only.get("r0", "k"));
  EXPECT_FALSE(memory_only.get("r1", "k"));
  EXPECT_TRUE(memory_only.get("r3", "k"));

  const auto path =
      std::filesystem::temp_directory_path() / ("kvgate_responses_" + std::to_string(::getpid()) + ".db");
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path.string() + suffix);
  {  // closed before its files are removed (Windows removes no open file)
    auto db = session::SessionStore::open(path);
    ASSERT_TRUE(db.ok()) << db.error().message();
    ResponseStore backed({.max_in_memory = 2});
    backed.attach(db->get());
    for (int i = 0; i < 4; ++i) backed.put("r" + std::to_string(i), made_by("k", std::to_string(i)));
    ASSERT_TRUE(backed.get("r0", "k"));  // read back from the store
    EXPECT_EQ(backed.get("r0", "k")->response, "0");
    EXPECT_FALSE(backed.get("r0", "other"));
    ResponseStore after_restart({.max_in_memory = 2});
    after_restart.attach(db->get());
    EXPECT_TRUE(after_restart.get("r1", "k"));
  }
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path.string() + suffix);
}

session::StoredResponse step(const std::string& parent, const std::string& text) {
  const nlohmann::json messages = {{{"role", "user"}, {"content", text}},
                                   {{"role", "assistant"}, {"content", "ok"}}};
  return {.scope = "k", .created = 1, .response = "{}", .messages = messages.dump(), .parent = parent};
}

TEST(ResponseStoreTest, AChainIsStoredOnceAndPutTogetherAlongItsParents) {
  ResponseStore store;
  store.put("r0", step("", std::string(1 << 20, 'x')));  // a 1 MB conversation
  for (int i = 1; i <= 100; ++i) store.put("r" + std::to_string(i), step("r" + std::to_string(i - 1), "q"));
  for (int i = 0; i < 60; ++i) store.put("fork" + std::to_string(i), step("r0", "fork"));
  // Each continuation holds its own step only.
  EXPECT_LT(store.get("r100", "k")->bytes(), 200u);
  EXPECT_LT(store.get("fork59", "k")->bytes(), 200u);
  auto h = store.history("r100", "k");
  ASSERT_TRUE(h.ok()) << h.error().message();
  ASSERT_TRUE(h->has_value());
  ASSERT_EQ((**h).size(), 202u);
  EXPECT_EQ((**h)[0]["content"].get<std::string>().size(), 1u << 20);
  EXPECT_EQ((**h)[201]["content"], "ok");
  EXPECT_EQ((**h)[200]["content"], "q");
  EXPECT_FALSE(*store.history("r100", "other"));  // another key's: unknown
  EXPECT_FALSE(*store.history("nothing", "k"));
}

TEST(ResponseStoreTest, AnEvictedAncestorOrATooLongChainIsAClearError) {
  ResponseStore store({.max_in_memory = 1000, .memory_bytes = 4096, .max_depth = 5});
  store.put("big", step("", std::string(3000, 'x')));
  store.put("child", step("big", "q"));
  store.put("evicts", step("", std::string(3000, 'y')));  // the budget: "big" goes
  auto h = store.history("child", "k");
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.error().message().find("big, which is no longer stored"), std::string::npos)
      << h.error().message();
  for (int i = 1; i <= 6; ++i)
    store.put("c" + std::to_string(i), step(i == 1 ? "" : "c" + std::to_string(i - 1), "q"));
  EXPECT_TRUE(store.history("c5", "k").ok());
  auto deep = store.history("c6", "k");
  ASSERT_FALSE(deep.ok());
  EXPECT_NE(deep.error().message().find("more than 5 responses"), std::string::npos)
      << deep.error().message();
}

}  // namespace
}  // namespace kvgate::gateway
