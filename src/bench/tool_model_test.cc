#include "bench/tool_model.h"

#include <gtest/gtest.h>

#include "upstream/reply.h"

namespace kvgate::bench {
namespace {

using nlohmann::json;

json tools() {
  return json::array(
      {{{"type", "function"},
        {"function",
         {{"name", "read_file"},
          {"parameters", {{"type", "object"}, {"properties", {{"path", {{"type", "string"}}}}}, {"required", {"path"}}}}}}},
       {{"type", "function"}, {"function", {{"name", "now"}, {"parameters", {{"type", "object"}}}}}}});
}

TEST(ToolModelTest, OnlyRequiredCallsWithToolsAreAnswered) {
  EXPECT_TRUE(requires_tool_call({{"tools", tools()}, {"tool_choice", "required"}}));
  EXPECT_FALSE(requires_tool_call({{"tools", tools()}, {"tool_choice", "auto"}}));
  EXPECT_FALSE(requires_tool_call({{"tools", tools()}}));
  EXPECT_FALSE(requires_tool_call({{"tools", json::array()}, {"tool_choice", "required"}}));
  EXPECT_FALSE(requires_tool_call(json::array()));
}

TEST(ToolModelTest, GrammarWritesTheTemplatesCalls) {
  const std::string g = tool_call_grammar(tools(), 2);
  EXPECT_NE(g.find("root ::= call (\"\\n\" call)?\n"), std::string::npos) << g;
  EXPECT_NE(g.find(R"(call ::= "<tool_call>\n{\"name\": \"" fn "}\n</tool_call>")"), std::string::npos) << g;
  EXPECT_NE(g.find(R"("read_file\", \"arguments\": {" "\"path\": \"" value "\"}")"), std::string::npos) << g;
  EXPECT_NE(g.find(R"("now\", \"arguments\": {" "}")"), std::string::npos) << g;
  EXPECT_NE(tool_call_grammar(tools(), 1).find("root ::= call\n"), std::string::npos);
}

TEST(ToolModelTest, StreamedAnswerRebuildsTheSameMessage) {
  const json message = {{"role", "assistant"},
                        {"content", nullptr},
                        {"tool_calls",
                         {{{"type", "function"},
                           {"function", {{"name", "read_file"}, {"arguments", "{\"path\": \"a\"}"}}},
                           {"id", "call_1"}},
                          {{"type", "function"}, {"function", {{"name", "now"}, {"arguments", "{}"}}}, {"id", "call_2"}}}}};
  const json answer = {{"id", "x"},
                       {"object", "chat.completion"},
                       {"created", 1},
                       {"model", "m"},
                       {"choices", {{{"index", 0}, {"message", message}, {"finish_reason", "tool_calls"}}}},
                       {"usage", {{"prompt_tokens", 100}, {"completion_tokens", 40}, {"total_tokens", 140},
                                  {"prompt_tokens_details", {{"cached_tokens", 90}}}}},
                       {"timings", {{"cache_n", 90}, {"prompt_n", 10}, {"predicted_n", 40}}}};
  const std::string events = as_event_stream(answer.dump());
  gateway::ReplyAccumulator acc;
  size_t pos = 0, chunks = 0;
  bool done = false;
  while ((pos = events.find("data: ", pos)) != std::string::npos) {
    const size_t end = events.find("\n\n", pos);
    ASSERT_NE(end, std::string::npos);
    const std::string data = events.substr(pos + 6, end - pos - 6);
    pos = end;
    if (data == "[DONE]") {
      done = true;
      continue;
    }
    acc.add_chunk(json::parse(data));
    ++chunks;
  }
  EXPECT_TRUE(done);
  EXPECT_EQ(chunks, 3U);
  const json rebuilt = acc.message();
  ASSERT_EQ(rebuilt["tool_calls"].size(), 2U);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(rebuilt["tool_calls"][i]["id"], message["tool_calls"][i]["id"]);
    EXPECT_EQ(rebuilt["tool_calls"][i]["function"], message["tool_calls"][i]["function"]);
  }
  EXPECT_EQ(acc.finish_reason(), "tool_calls");
  EXPECT_EQ(acc.usage().prompt_tokens, 100U);
  EXPECT_EQ(acc.usage().cached_tokens, 90U);
  EXPECT_EQ(acc.usage().prefilled_tokens, 10U);
  // An error answer stays what it was.
  const std::string error = R"({"error":{"code":500,"message":"x"}})";
  EXPECT_EQ(as_event_stream(error), error);
}

}  // namespace
}  // namespace kvgate::bench
