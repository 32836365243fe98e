#include "session/tool_clearing.h"

#include <gtest/gtest.h>

namespace kvgate::session {
namespace {

using nlohmann::json;

Result<uint64_t> count_text(const std::string& s) { return (s.size() + 3) / 4; }

// `turns` tool uses; even ones call read_file, odd ones call `other`.
Conversation agent(int turns, const std::string& other = "grep") {
  Conversation c;
  c.append({{"role", "system"}, {"content", "You are an agent."}});
  for (int i = 0; i < turns; ++i) {
    const std::string id = "call" + std::to_string(i);
    c.append({{"role", "user"}, {"content", "step " + std::to_string(i)}});
    c.append(
        {{"role", "assistant"},
         {"content", nullptr},
         {"tool_calls",
          json::array({{{"id", id},
                        {"type", "function"},
                        {"function", {{"name", i % 2 == 0 ? "read_file" : other}, {"arguments", "{}"}}}}})}});
    c.append({{"role", "tool"},
              {"tool_call_id", id},
              {"content", "output " + std::to_string(i) + std::string(400, 'x')}});
    c.append({{"role", "assistant"}, {"content", "ok " + std::to_string(i)}});
  }
  return c;
}

std::string view_text(const Conversation& c) { return build_view(c).dump(); }

TEST(ToolClearing, ClearsAllButTheNewestAndKeepsTheirText) {
  Conversation c = agent(5);
  auto r = clear_tool_results(c, {.keep = 2}, count_text);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->cleared, 3u);
  EXPECT_EQ(r->tokens, 3u * ((std::string("output 0").size() + 400 + 3) / 4));
  const std::string view = view_text(c);
  for (int i = 0; i < 5; ++i) {
    const bool kept = view.find("output " + std::to_string(i) + "xxx") != std::string::npos;
    EXPECT_EQ(kept, i >= 3) << i;
  }
  EXPECT_NE(view.find("tokens elided by kvgate"), std::string::npos);
  // The calls themselves stay: the model still sees what it asked for.
  EXPECT_NE(view.find("call0"), std::string::npos);
}

TEST(ToolClearing, AClearedResultStaysClearedAndTheViewOnlyGrows) {
  Conversation c = agent(4);
  ASSERT_TRUE(clear_tool_results(c, {.keep = 1}, count_text).ok());
  const std::string before = build_view(c).dump();
  c.append({{"role", "user"}, {"content", "next"}});
  const std::string after = build_view(c).dump();
  // The earlier view is the start of the later one (less its closing bracket).
  EXPECT_EQ(after.substr(0, before.size() - 1), before.substr(0, before.size() - 1));
  // Nothing more to clear with the same newest results.
  auto again = clear_tool_results(c, {.keep = 1}, count_text);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->cleared, 0u);
}

TEST(ToolClearing, ExcludedToolsAndTooLittleAreLeftAlone) {
  Conversation c = agent(6);
  auto r = clear_tool_results(c, {.keep = 0, .exclude_tools = {"read_file"}}, count_text);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->cleared, 3u);  // the odd ones (grep)
  const std::string view = view_text(c);
  EXPECT_NE(view.find("output 0xxx"), std::string::npos);
  EXPECT_EQ(view.find("output 1xxx"), std::string::npos);

  Conversation d = agent(3);
  const uint64_t generation = d.generation;
  auto none = clear_tool_results(d, {.keep = 1, .clear_at_least = 100000}, count_text);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->cleared, 0u);
  EXPECT_TRUE(d.truncations.empty());
  EXPECT_EQ(d.generation, generation);
  EXPECT_EQ(tool_results(d), 3u);
}

TEST(ToolClearing, ACountThatFailsChangesNothing) {
  Conversation c = agent(3);
  auto r = clear_tool_results(c, {.keep = 0},
                              [](const std::string&) -> Result<uint64_t> { return Error("down"); });
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(c.truncations.empty());
}

}  // namespace
}  // namespace kvgate::session
