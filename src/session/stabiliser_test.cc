#include "session/stabiliser.h"

#include <gtest/gtest.h>

namespace kvgate::session {
namespace {

using nlohmann::json;

TEST(StabiliserTest, PinsVolatileLinesOnly) {
  const std::string first = "Current time: 2026-11-29 10:02:35\nYou are an agent.\nRequest: 3f2b8c1e-9a4d-4e6f-8b7a-1c2d3e4f5a6b";
  const std::string later = "Current time: 2026-11-29 10:03:03\nYou are an agent.\nRequest: 9a2b8c1e-9a4d-4e6f-8b7a-1c2d3e4f5a6c";
  auto r = pin_volatile_lines(first, later);
  EXPECT_FALSE(r.edited);
  EXPECT_EQ(r.upstream, first);
  ASSERT_EQ(r.current.size(), 2U);
  EXPECT_EQ(r.current[0], "Current time: 2026-11-29 10:03:03");
  EXPECT_NE(volatile_note(r.current).find("10:03:03"), std::string::npos);

  auto edited = pin_volatile_lines(first, "Current time: 2026-11-29 10:03:03\nYou are a different agent.\nRequest: x");
  EXPECT_TRUE(edited.edited);
  EXPECT_EQ(edited.upstream.find("different"), std::string("Current time: 2026-11-29 10:03:03\nYou are a ").size());
  EXPECT_TRUE(pin_volatile_lines(first, first + "\nmore").edited);
  EXPECT_TRUE(pin_volatile_lines(first, first).current.empty());
}

TEST(StabiliserTest, ReordersToolResultsIntoCallOrder) {
  json m = json::array({
      {{"role", "user"}, {"content", "go"}},
      {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", json::array({{{"id", "a"}}, {{"id", "b"}}, {{"id", "c"}}})}},
      {{"role", "tool"}, {"tool_call_id", "c"}, {"content", "C"}},
      {{"role", "tool"}, {"tool_call_id", "a"}, {"content", "A"}},
      {{"role", "tool"}, {"tool_call_id", "b"}, {"content", "B"}},
      {{"role", "user"}, {"content", "next"}},
  });
  EXPECT_EQ(reorder_tool_results(m), 1U);
  EXPECT_EQ(m[2]["content"], "A");
  EXPECT_EQ(m[3]["content"], "B");
  EXPECT_EQ(m[4]["content"], "C");
  EXPECT_EQ(m[5]["content"], "next");
  EXPECT_EQ(reorder_tool_results(m), 0U);  // already in order
  json unknown = json::array({{{"role", "assistant"}, {"tool_calls", json::array({{{"id", "a"}}})}},
                              {{"role", "tool"}, {"tool_call_id", "zzz"}, {"content", "?"}},
                              {{"role", "tool"}, {"tool_call_id", "a"}, {"content", "A"}}});
  reorder_tool_results(unknown);
  EXPECT_EQ(unknown[1]["content"], "A");  // known calls first, unknown ids keep their order after
}

TEST(StabiliserTest, Divergence) {
  json a = json::array({{{"role", "system"}, {"content", "s"}}, {{"role", "user"}, {"content", "u"}}});
  json b = a;
  b.push_back({{"role", "assistant"}, {"content", "x"}});
  EXPECT_EQ(first_different_message(a, b), 2U);
  b[1]["content"] = "v";
  EXPECT_EQ(first_different_message(a, b), 1U);
  EXPECT_EQ(first_different_byte("abcdef", "abcXef"), 3U);
  EXPECT_EQ(first_different_byte("abc", "abcdef"), 3U);
  EXPECT_STREQ(cause_name(BreakCause::kSlotEviction), "slot_eviction");
}

}  // namespace
}  // namespace kvgate::session
