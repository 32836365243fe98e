#include "session/thinking.h"

#include <gtest/gtest.h>

namespace kvgate::session {
namespace {

using nlohmann::json;

TEST(ThinkingTest, OffByDefault) {
  json b = {{"messages", json::array()}, {"model", "m"}};
  EXPECT_FALSE(apply_thinking_policy(b, {}));
  EXPECT_EQ(b["chat_template_kwargs"]["enable_thinking"], false);
  EXPECT_EQ(b["model"], "m");
}

TEST(ThinkingTest, ClientChoicesWin) {
  json ext = {{"kvgate", {{"thinking", true}}}};
  EXPECT_TRUE(apply_thinking_policy(ext, {}));
  EXPECT_FALSE(ext.contains("kvgate"));
  EXPECT_EQ(ext["chat_template_kwargs"]["enable_thinking"], true);

  json suffix = {{"model", "qwen:thinking"}};
  EXPECT_TRUE(apply_thinking_policy(suffix, {}));
  EXPECT_EQ(suffix["model"], "qwen");
  json nosuffix = {{"model", "qwen:no-thinking"}};
  EXPECT_FALSE(apply_thinking_policy(nosuffix, {.default_on = true}));
  EXPECT_EQ(nosuffix["model"], "qwen");

  json kw = {{"chat_template_kwargs", {{"enable_thinking", true}, {"x", 1}}}};
  EXPECT_TRUE(apply_thinking_policy(kw, {}));
  EXPECT_EQ(kw["chat_template_kwargs"]["x"], 1);

  json effort = {{"reasoning_effort", "none"}};
  EXPECT_FALSE(apply_thinking_policy(effort, {.default_on = true}));
  json effort_high = {{"reasoning_effort", "high"}};
  EXPECT_TRUE(apply_thinking_policy(effort_high, {}));

  json server_default = json::object();
  EXPECT_TRUE(apply_thinking_policy(server_default, {.default_on = true}));
}

TEST(ThinkingTest, StripsHistoryReasoningIdenticallyEveryTurn) {
  json m = json::array({{{"role", "user"}, {"content", "q"}},
                        {{"role", "assistant"}, {"content", "a"}, {"reasoning_content", "because"}},
                        {{"role", "assistant"}, {"content", "b"}, {"reasoning", "r"}, {"thinking", "t"}}});
  json copy = m;
  EXPECT_EQ(strip_history_reasoning(m), 3U);
  EXPECT_EQ(strip_history_reasoning(copy), 3U);
  EXPECT_EQ(m, copy);
  EXPECT_FALSE(m[1].contains("reasoning_content"));
  EXPECT_EQ(strip_history_reasoning(m), 0U);
}

TEST(ThinkingTest, EmptyContentFallback) {
  json r = {{"choices", json::array({{{"message", {{"role", "assistant"}, {"content", ""}, {"reasoning_content", "answer"}}}}})}};
  EXPECT_TRUE(apply_empty_content_fallback(r, {}));
  EXPECT_EQ(r["choices"][0]["message"]["content"], "answer");
  json keep = {{"choices", json::array({{{"message", {{"content", nullptr}, {"reasoning_content", "x"}}}}})}};
  EXPECT_FALSE(apply_empty_content_fallback(keep, {.fallback = EmptyContentFallback::kKeep}));
  json calls = {{"choices", json::array({{{"message", {{"content", nullptr}, {"reasoning_content", "x"},
                                                        {"tool_calls", json::array({json::object()})}}}}})}};
  EXPECT_FALSE(apply_empty_content_fallback(calls, {}));
}

}  // namespace
}  // namespace kvgate::session
