#include "upstream/token_estimate.h"

#include <gtest/gtest.h>

namespace kvgate::gateway {
namespace {

using nlohmann::json;

json message(const std::string& role, const std::string& content) {
  return {{"role", role}, {"content", content}};
}

TEST(TokenEstimateTest, NothingIsEstimatedBeforeTheServerAnswered) {
  TokenEstimate e;
  EXPECT_FALSE(e.estimate(1000));
  EXPECT_FALSE(e.rate());
  e.learn(0, 10);  // nothing to learn from
  e.learn(10, 0);
  EXPECT_FALSE(e.rate());
}

TEST(TokenEstimateTest, APromptLikeOneAnsweredIsNeverUnderestimated) {
  TokenEstimate e;
  const json body = {{"max_tokens", 8}};
  json messages = json::array({message("system", "You are terse."), message("user", std::string(4000, 'a'))});
  const uint64_t units = TokenEstimate::units(body, messages);
  e.learn(units, 1100);
  ASSERT_TRUE(e.estimate(units));
  EXPECT_GE(*e.estimate(units), 1100u);
  EXPECT_LE(*e.estimate(units), 1100u * 111 / 100 + 1);  // the 10 % margin, no more
  // Twice the size: twice the bound.
  EXPECT_NEAR(static_cast<double>(*e.estimate(2 * units)), 2.0 * static_cast<double>(*e.estimate(units)),
              2.0);
}

TEST(TokenEstimateTest, TheLargestRateOfTheRecentAnswersIsTheBound) {
  TokenEstimate e;
  e.learn(1000, 250);  // English-like: 4 bytes a token
  e.learn(1000, 600);  // denser text
  e.learn(1000, 250);
  EXPECT_DOUBLE_EQ(*e.rate(), 0.6);
  EXPECT_GE(*e.estimate(1000), 600u);
  // Forgotten once kWindow newer answers came.
  for (size_t i = 0; i < TokenEstimate::kWindow; ++i) e.learn(1000, 250);
  EXPECT_DOUBLE_EQ(*e.rate(), 0.25);
}

TEST(TokenEstimateTest, SizeCountsMessagesTheirMarkupAndTools) {
  const json none = json::object();
  const json one = json::array({message("user", "hello")});
  const json two = json::array({message("user", "hello"), message("assistant", "hi")});
  const uint64_t u1 = TokenEstimate::units(none, one);
  const uint64_t u2 = TokenEstimate::units(none, two);
  EXPECT_GE(u1, TokenEstimate::kPromptUnits + TokenEstimate::kMessageUnits + 5);
  EXPECT_GE(u2, u1 + TokenEstimate::kMessageUnits + 2);
  const json tools = {
      {"tools", json::array({{{"type", "function"}, {"function", {{"name", "read_file"}}}}})}};
  EXPECT_GT(TokenEstimate::units(tools, one), u1 + 20);
  // Bytes, not characters: CJK text is three bytes a character.
  const json zh = json::array({message("user", "你好世界")});
  const json en = json::array({message("user", "abcd")});
  EXPECT_EQ(TokenEstimate::units(none, zh), TokenEstimate::units(none, en) + 8);
  EXPECT_EQ(TokenEstimate::text_units("你好"), 6u);
}

}  // namespace
}  // namespace kvgate::gateway
