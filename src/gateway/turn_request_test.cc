#include "gateway/turn_request.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace kvgate::gateway {
namespace {

using nlohmann::json;

json chat(json messages) { return {{"messages", std::move(messages)}}; }

TEST(TurnRequestTest, HistoryIsRepairedBeforeItIsValidated) {
  // Truncated tool-call arguments, and a tool result for a call nobody made: what the engine
  // would refuse becomes what it accepts, and each repair is listed.
  const json body = chat(json::array(
      {{{"role", "user"}, {"content", "go"}},
       {{"role", "assistant"},
        {"content", nullptr},
        {"tool_calls", {{{"id", "c1"}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", "{\"a\": 1"}}}}}}},
       {{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "ok"}},
       {{"role", "tool"}, {"tool_call_id", "nobody"}, {"content", "orphan"}}}));
  auto prepared = prepare_chat(body, RequestLimits{});
  ASSERT_TRUE(prepared.ok()) << prepared.error().message;
  const json& messages = prepared->request.body["messages"];
  EXPECT_EQ(json::parse(messages[1]["tool_calls"][0]["function"]["arguments"].get<std::string>()), json({{"a", 1}}));
  EXPECT_EQ(messages[3]["role"], "user");  // the orphan result, as the user's text
  std::set<std::string> kinds;
  for (const auto& r : prepared->repairs) kinds.insert(std::string(rescue::repair_kind_name(r.kind)));
  EXPECT_EQ(kinds, (std::set<std::string>{"arguments_closed", "orphan_tool_result"}));
}

TEST(TurnRequestTest, BoundsComeFirstAndValidationNamesTheField) {
  json many = json::array();
  for (int i = 0; i < 5; ++i) many.push_back({{"role", "user"}, {"content", "x"}});
  auto refused = prepare_chat(chat(many), RequestLimits{.max_messages = 4});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().status, 413);
  EXPECT_EQ(refused.error().code, "too_many_messages");
  auto bad = prepare_chat(json{{"messages", json::array({{{"role", "user"}, {"content", "x"}}})}, {"n", 2}},
                          RequestLimits{});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().param, "n");
  auto not_object = prepare_chat(json::array({1, 2}), RequestLimits{});
  ASSERT_FALSE(not_object.ok());
  EXPECT_EQ(not_object.error().status, 400);
}

TEST(TurnRequestTest, StabilisingAppliesThePolicyAndTheSameRulesToTheWholeHistory) {
  json body = chat(json::array({{{"role", "user"}, {"content", "go"}},
                                {{"role", "assistant"},
                                 {"content", nullptr},
                                 {"reasoning_content", "thought"},
                                 {"tool_calls",
                                  {{{"id", "a"}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", "{}"}}}},
                                   {{"id", "b"}, {"type", "function"}, {"function", {{"name", "g"}, {"arguments", "{}"}}}}}}},
                                {{"role", "tool"}, {"tool_call_id", "b"}, {"content", "B"}},
                                {{"role", "tool"}, {"tool_call_id", "a"}, {"content", "A"}}}));
  body["model"] = "m:thinking";
  const Stabilised s = stabilise(body, {.default_on = false}, {});
  EXPECT_TRUE(s.thinking);  // the model suffix asks for it
  EXPECT_EQ(body["model"], "m");
  EXPECT_EQ(body["chat_template_kwargs"]["enable_thinking"], true);
  EXPECT_EQ(s.stripped, 1u);
  EXPECT_FALSE(body["messages"][1].contains("reasoning_content"));
  EXPECT_EQ(s.reordered, 1u);
  EXPECT_EQ(body["messages"][2]["tool_call_id"], "a");
  EXPECT_EQ(body["messages"][3]["tool_call_id"], "b");
  // Reordering off: the results stay where the client put them.
  json again = chat(body["messages"]);
  std::swap(again["messages"][2], again["messages"][3]);
  EXPECT_EQ(stabilise(again, {}, {.reorder_tool_results = false}).reordered, 0u);
  EXPECT_EQ(again["messages"][2]["tool_call_id"], "b");
}

}  // namespace
// A tools text that no longer says what the body holds (history repair changed the tools,
// or the client repeated the key) is not sent: the body's own value is.
TEST(ToolsAsWrittenTest, OnlyATextThatHoldsTheBodysToolsIsUsed) {
  const std::string written = R"([{"type":"function","function":{"name":"f","parameters":{"z":1,"a":2}}}])";
  const json body = {{"tools", json::parse(written)}};
  EXPECT_EQ(tools_as_written(written, body), written);
  EXPECT_EQ(tools_as_written(" [ " + written.substr(1), body), written);  // re-written compact
  EXPECT_EQ(tools_as_written(R"([{"type":"function","function":{"name":"g"}}])", body), "");
  EXPECT_EQ(tools_as_written("[1,", body), "");
  EXPECT_EQ(tools_as_written("", body), "");
  EXPECT_EQ(tools_as_written(written, json::object()), "");
  EXPECT_EQ(tools_as_written("[]", {{"tools", json::array()}}), "");
}

}  // namespace kvgate::gateway
