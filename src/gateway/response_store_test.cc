#include "gateway/response_store.h"

#include <gtest/gtest.h>

#include <filesystem>

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
  ResponseStore memory_only(2);
  for (int i = 0; i < 4; ++i) memory_only.put("r" + std::to_string(i), made_by("k", std::to_string(i)));
  EXPECT_FALSE(memory_only.get("r0", "k"));
  EXPECT_FALSE(memory_only.get("r1", "k"));
  EXPECT_TRUE(memory_only.get("r3", "k"));

  const auto path = std::filesystem::temp_directory_path() / ("kvgate_responses_" + std::to_string(::getpid()) + ".db");
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path.string() + suffix);
  auto db = session::SessionStore::open(path);
  ASSERT_TRUE(db.ok()) << db.error().message();
  ResponseStore backed(2);
  backed.attach(db->get());
  for (int i = 0; i < 4; ++i) backed.put("r" + std::to_string(i), made_by("k", std::to_string(i)));
  ASSERT_TRUE(backed.get("r0", "k"));  // read back from the store
  EXPECT_EQ(backed.get("r0", "k")->response, "0");
  EXPECT_FALSE(backed.get("r0", "other"));
  ResponseStore after_restart(2);
  after_restart.attach(db->get());
  EXPECT_TRUE(after_restart.get("r1", "k"));
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path.string() + suffix);
}

}  // namespace
}  // namespace kvgate::gateway
