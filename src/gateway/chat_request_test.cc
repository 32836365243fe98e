#include "gateway/chat_request.h"

#include <gtest/gtest.h>

namespace kvgate::gateway {
namespace {

std::optional<ApiError> parse(std::string_view text) {
  ChatRequest r;
  return parse_chat_request(text, r);
}

TEST(ChatRequestTest, AcceptsATypicalAgentRequest) {
  ChatRequest r;
  auto err = parse_chat_request(R"({"model":"m","stream":true,"stream_options":{"include_usage":true},
    "max_tokens":64,"user":"agent-1","messages":[
      {"role":"system","content":"s"},
      {"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"x"}}]},
      {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\""}}]},
      {"role":"tool","tool_call_id":"c1","content":"result"}],
    "tools":[{"type":"function","function":{"name":"f","parameters":{}}}],"temperature":0.2})",
                                r);
  ASSERT_FALSE(err) << err->message;
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.max_tokens, 64);
  EXPECT_EQ(r.user, "agent-1");
  EXPECT_TRUE(r.has_tools);
  EXPECT_EQ(r.messages().size(), 4U);
}

TEST(ChatRequestTest, ErrorsNameTheField) {
  struct Case { const char* body; const char* param; const char* needle; };
  for (const auto& c : std::vector<Case>{
           {R"({"messages":[{"role":"user","content":"x"}],)", nullptr, "not valid JSON"},
           {R"([1,2])", nullptr, "must be a JSON object"},
           {R"({})", "messages", "messages is required"},
           {R"({"messages":"hi"})", "messages", "messages must be an array, got a string"},
           {R"({"messages":[]})", "messages", "at least one message"},
           {R"({"messages":[{"content":"x"}]})", "messages[0].role", "messages[0].role is required"},
           {R"({"messages":[{"role":7,"content":"x"}]})", "messages[0].role", "must be a string, got an integer"},
           {R"({"messages":[{"role":"user","content":"x"},{"role":"wizard","content":"y"}]})", "messages[1].role", "'wizard' must be one of"},
           {R"({"messages":[{"role":"user"}]})", "messages[0].content", "content is required"},
           {R"({"messages":[{"role":"user","content":null}]})", "messages[0].content", "must not be null"},
           {R"({"messages":[{"role":"user","content":[{"text":"x"}]}]})", "messages[0].content[0].type", "type must be a string"},
           {R"({"messages":[{"role":"assistant","content":"","tool_calls":[{"function":{"arguments":"{}"}}]}]})", "messages[0].tool_calls[0].function.name", "must be a string"},
           {R"({"messages":[{"role":"user","content":"x"}],"stream":"yes"})", "stream", "stream must be a boolean"},
           {R"({"messages":[{"role":"user","content":"x"}],"n":2})", "n", "only n = 1"},
           {R"({"messages":[{"role":"user","content":"x"}],"max_tokens":"many"})", "max_tokens", "must be an integer"},
           {R"({"messages":[{"role":"user","content":"x"}],"max_tokens":-5})", "max_tokens", "at least -1"},
           {R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":""}}]})", "tools[0].function.name", "non-empty"},
       }) {
    auto err = parse(c.body);
    ASSERT_TRUE(err) << c.body;
    EXPECT_EQ(err->status, 400);
    EXPECT_NE(err->message.find(c.needle), std::string::npos) << err->message;
    if (c.param) {
      EXPECT_EQ(err->param, std::string(c.param)) << c.body;
    } else {
      EXPECT_FALSE(err->param) << c.body;
    }
  }
}

TEST(ChatRequestTest, DeeplyNestedJsonDoesNotCrash) {
  std::string deep(100000, '[');
  EXPECT_TRUE(parse(deep));
  std::string nested = R"({"messages":[{"role":"user","content":"x"}],"extra":)" + std::string(5000, '[') + std::string(5000, ']') + "}";
  EXPECT_FALSE(parse(nested));
  // Half a million levels: parsing and destruction must not recurse on the stack.
  std::string very = R"({"messages":[{"role":"user","content":"x"}],"extra":)" + std::string(500000, '[') +
                     std::string(500000, ']') + "}";
  EXPECT_FALSE(parse(very));
}

}  // namespace
}  // namespace kvgate::gateway
