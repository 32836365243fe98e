#include "bench/trace.h"

#include <fstream>

#include <gtest/gtest.h>
#include <unistd.h>
#include "testing/paths.h"

namespace kvgate::bench {
namespace {

using nlohmann::json;

std::filesystem::path write_file(const std::string& name, const std::string& text) {
  const auto p =
      std::filesystem::temp_directory_path() / ("kvgate_trace_" + std::to_string(::getpid()) + "_" + name);
  std::ofstream(p, std::ios::binary) << text;
  return p;
}

TEST(TraceTest, LoadsMetaAndTurns) {
  const auto p = write_file("ok.jsonl",
                            "{\"_meta\": {\"name\": \"demo\", \"turns\": 2}}\n"
                            "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}]}\r\n"
                            "\n"
                            "{\"messages\": [{\"role\": \"user\", \"content\": \"b\"}], \"stream\": true}\n");
  auto t = load_trace(p);
  ASSERT_TRUE(t.ok()) << t.error().message();
  EXPECT_EQ(t->name, "demo");
  EXPECT_EQ(t->meta["turns"], 2);
  ASSERT_EQ(t->turns.size(), 2U);
  EXPECT_EQ(t->turns[1]["stream"], true);
  auto first = load_trace(p, 1);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->turns.size(), 1U);
  std::filesystem::remove(p);
}

TEST(TraceTest, ErrorsNameTheLine) {
  struct Case {
    const char* text;
    const char* expected;
  };
  for (const Case& c : {Case{"{\"messages\": [{}]}\n{not json\n", ":2: not a JSON value"},
                        Case{"[1, 2]\n", ":1: expected a JSON object"},
                        Case{"{\"messages\": []}\n", ":1: a chat request needs a non-empty messages array"},
                        Case{"{\"messages\": [{}]}\n{\"_meta\": {}}\n", ":2: _meta must be the first line"},
                        Case{"{\"_meta\": {}}\n", "has no requests"}}) {
    const auto p = write_file("bad.jsonl", c.text);
    auto t = load_trace(p);
    ASSERT_FALSE(t.ok()) << c.text;
    EXPECT_NE(t.error().message().find(c.expected), std::string::npos) << t.error().message();
    std::filesystem::remove(p);
  }
  EXPECT_FALSE(load_trace("/nonexistent/trace.jsonl").ok());
}

TEST(TraceTest, SharedTracesGrowTurnByTurn) {
  for (const char* name : {"agent-timestamp.jsonl.zst", "agent-zh-reasoning.jsonl.zst"}) {
    auto t = load_trace(std::filesystem::path(kvgate::testing::source_dir()) / "tests/fixtures/traces" / name);
    ASSERT_TRUE(t.ok()) << t.error().message();
    EXPECT_EQ(t->turns.size(), 40U) << name;
    EXPECT_EQ(t->meta["turns"], 40) << name;
    // Every turn extends the previous one from message 1 on (only the system prompt's
    // clock line changes), which --live relies on.
    for (size_t k = 1; k < t->turns.size(); ++k) {
      const json& prev = t->turns[k - 1]["messages"];
      const LiveHistory h = live_history(prev, prev, t->turns[k]["messages"], std::nullopt);
      EXPECT_TRUE(h.live) << name << " turn " << k + 1 << ": " << h.reason;
      EXPECT_EQ(h.messages, t->turns[k]["messages"]) << name << " turn " << k + 1;
    }
  }
}

TEST(TraceTest, LiveHistoryUsesTheModelsReply) {
  const json call = {{"id", "c1"}, {"type", "function"}, {"function", {{"name", "ls"}, {"arguments", "{}"}}}};
  const json prev_trace =
      json::array({{{"role", "system"}, {"content", "t=1"}}, {{"role", "user"}, {"content", "go"}}});
  const json current = json::array({{{"role", "system"}, {"content", "t=2"}},
                                    {{"role", "user"}, {"content", "go"}},
                                    {{"role", "assistant"},
                                     {"content", "recorded"},
                                     {"reasoning_content", "r"},
                                     {"tool_calls", json::array({call})}},
                                    {{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "files"}},
                                    {{"role", "user"}, {"content", "next"}}});
  const json reply = {{"role", "assistant"}, {"content", "the model's words"}};
  // What was sent last turn differs from the trace (an earlier live reply); it is kept.
  json prev_sent = prev_trace;
  prev_sent[1]["content"] = "go (as sent)";
  const LiveHistory h = live_history(prev_trace, prev_sent, current, reply);
  ASSERT_TRUE(h.live) << h.reason;
  ASSERT_EQ(h.messages.size(), 5U);
  EXPECT_EQ(h.messages[0]["content"], "t=2");  // this turn's system prompt
  EXPECT_EQ(h.messages[1]["content"], "go (as sent)");
  EXPECT_EQ(h.messages[2]["content"], "the model's words");
  EXPECT_FALSE(h.messages[2].contains("reasoning_content"));
  EXPECT_EQ(h.messages[2]["tool_calls"][0]["id"], "c1");  // the trace's call, answered by its tool result
  EXPECT_EQ(h.messages[3], current[3]);
  EXPECT_EQ(h.messages[4], current[4]);

  // No reply (the previous turn failed): the trace's message stays.
  const LiveHistory none = live_history(prev_trace, prev_sent, current, std::nullopt);
  EXPECT_EQ(none.messages[2], current[2]);

  // A trace whose history changed is used as it is.
  json edited = current;
  edited[1]["content"] = "changed";
  const LiveHistory e = live_history(prev_trace, prev_sent, edited, reply);
  EXPECT_FALSE(e.live);
  EXPECT_EQ(e.messages, edited);
  EXPECT_NE(e.reason.find("message 1"), std::string::npos) << e.reason;
}

}  // namespace
}  // namespace kvgate::bench
