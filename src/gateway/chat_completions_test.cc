#include "gateway/chat_completions.h"

#include <gtest/gtest.h>

namespace kvgate::gateway {
namespace {

using nlohmann::json;

TEST(ChatCompletionsTest, TheHeaderNamesTheConversationFirstThenPromptCacheKeyThenUser) {
  const json body = {{"prompt_cache_key", "k1"}, {"user", "u1"}};
  auto by_header = named_conversation("s1", body);
  ASSERT_TRUE(by_header);
  EXPECT_EQ(by_header->id, "s1");
  EXPECT_EQ(by_header->how, "header");
  auto by_key = named_conversation(std::nullopt, body);
  ASSERT_TRUE(by_key);
  EXPECT_EQ(by_key->id, "cache:k1");
  EXPECT_EQ(by_key->how, "prompt_cache_key");
  auto by_user = named_conversation(std::nullopt, json{{"user", "u1"}});
  ASSERT_TRUE(by_user);
  EXPECT_EQ(by_user->id, "user:u1");
  EXPECT_EQ(by_user->how, "user");
  EXPECT_FALSE(named_conversation(std::nullopt, json{{"messages", json::array()}}));
}

TEST(ChatCompletionsTest, AnUnusableIdFallsThroughToTheNextOrToRecognition) {
  // Control characters, '/', empty or over 200 bytes: not an id.
  EXPECT_EQ(named_conversation("a/b", json{{"user", "u"}})->id, "user:u");
  EXPECT_EQ(named_conversation(std::string("a\nb"), json::object()), std::nullopt);
  EXPECT_EQ(named_conversation(std::string(201, 'x'), json::object()), std::nullopt);
  EXPECT_EQ(named_conversation(std::string(200, 'x'), json::object())->id, std::string(200, 'x'));
  EXPECT_EQ(named_conversation("", json{{"prompt_cache_key", ""}, {"user", 5}}), std::nullopt);
  EXPECT_EQ(named_conversation(std::nullopt, json::array()), std::nullopt);
}

}  // namespace
}  // namespace kvgate::gateway
