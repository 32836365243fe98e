#include "gateway/chat_request.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace kvgate::gateway {
namespace {

// The error a body is refused with, if any.
std::optional<ApiError> parse(std::string_view text) {
  auto r = parse_chat_request(text);
  return r.ok() ? std::nullopt : std::optional<ApiError>(r.error());
}

TEST(ChatRequestTest, AcceptsATypicalAgentRequest) {
  auto parsed = parse_chat_request(R"({"model":"m","stream":true,"stream_options":{"include_usage":true},
    "max_tokens":64,"user":"agent-1","messages":[
      {"role":"system","content":"s"},
      {"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"x"}}]},
      {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\""}}]},
      {"role":"tool","tool_call_id":"c1","content":"result"}],
    "tools":[{"type":"function","function":{"name":"f","parameters":{}}}],"temperature":0.2})");
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  const ChatRequest& r = *parsed;
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
           {R"({"messages":[{"role":"user","content":"x"}],"max_tokens":-5})", "max_tokens", "from -1 to 2147483647"},
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
  // The body object is level 1: 511 arrays inside it are the deepest accepted.
  auto nested = [](size_t n) {
    return R"({"messages":[{"role":"user","content":"x"}],"extra":)" + std::string(n, '[') + std::string(n, ']') + "}";
  };
  EXPECT_FALSE(parse(nested(kMaxJsonDepth - 1)));
  auto err = parse(nested(kMaxJsonDepth));
  ASSERT_TRUE(err);
  EXPECT_EQ(err->status, 400);
  EXPECT_EQ(err->code, "nesting_too_deep");
  EXPECT_NE(err->message.find("deeper than 512 levels"), std::string::npos) << err->message;
  EXPECT_EQ(err->param.value_or("").substr(0, 8), "extra[0]") << err->message;
  // Half a million levels: refused while parsing, nothing recurses on the stack.
  err = parse(nested(500000));
  ASSERT_TRUE(err);
  EXPECT_EQ(err->code, "nesting_too_deep");
}

// The measured crash: 100,000 levels in a field kvgate does not look at. The accepted body
// is then copied and dumped the way the gateway does (json copies and dump() recurse).
TEST(ChatRequestTest, DeepValueInAnUncheckedFieldIsRefused) {
  const std::string body = R"({"max_tokens":1,"messages":[{"role":"user","content":"hi"}],"metadata":)" +
                           std::string(100000, '[') + std::string(100000, ']') + "}";
  auto err = parse(body);
  ASSERT_TRUE(err);
  EXPECT_EQ(err->status, 400);
  EXPECT_EQ(err->type, "invalid_request_error");
  EXPECT_EQ(err->param.value_or("").rfind("metadata", 0), 0u) << *err->param;
  for (const char* field : {"metadata", "tools", "response_format", "stop"}) {
    const std::string b = fmt::format(R"({{"messages":[{{"role":"user","content":"hi"}}],"{}":{}{}}})", field,
                                      std::string(600, '['), std::string(600, ']'));
    auto e = parse(b);
    ASSERT_TRUE(e) << field;
    EXPECT_EQ(e->code, "nesting_too_deep") << field;
  }
  // What is accepted can be copied and dumped.
  auto r = parse_chat_request(R"({"messages":[{"role":"user","content":"hi"}],"metadata":)" +
                              std::string(511, '[') + std::string(511, ']') + "}");
  ASSERT_TRUE(r.ok());
  nlohmann::json copy = r->body;
  EXPECT_GT(copy.dump().size(), 1000u);
}

// Exact bytes of the measured 500s: each is a 400 naming the field, and the message is
// valid UTF-8 (the error answer itself is JSON).
TEST(ChatRequestTest, MalformedBytesAndNumbersAre400sNamingTheField) {
  struct Case { std::string body; const char* param; const char* code; };
  const std::vector<Case> cases = {
      {"{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\xc3(\"}]}", "messages[0].content", "invalid_json"},
      {"{\"messages\":[{\"role\":\"user\",\"content\":\"a\xc0\x80\"}]}", "messages[0].content", "invalid_json"},
      {"{\"messages\":[{\"role\":\"\xff\xfe\",\"content\":\"hi\"}]}", "messages[0].role", "invalid_json"},
      {"{\"messages\":[{\"role\":\"user\",\"content\":\"\\udc00\"}]}", "messages[0].content", "invalid_json"},
      {R"({"messages":[{"role":"user","content":"hi"}],"temperature":1e999999})", "temperature", "invalid_number"},
      {R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":)" + std::string(400, '9') + "}", "max_tokens",
       "invalid_number"},
      {R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":18446744073709551615})", "max_tokens",
       "invalid_value"},
      {R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":9223372036854775807})", "max_tokens",
       "invalid_value"},
      {R"({"messages":[{"role":"user","content":"hi"}],"n_predict":2147483648})", "n_predict", "invalid_value"},
      {R"({"messages":[{"role":"user","content":"hi"}],"max_completion_tokens":-2})", "max_completion_tokens",
       "invalid_value"},
  };
  for (const auto& c : cases) {
    auto err = parse(c.body);
    ASSERT_TRUE(err) << c.body;
    EXPECT_EQ(err->status, 400) << c.body;
    EXPECT_EQ(err->code, std::string(c.code)) << err->message;
    EXPECT_EQ(err->param, std::string(c.param)) << err->message;
    EXPECT_NO_THROW((void)err->to_json().dump()) << c.body;
  }
  // Fields of another type than expected, where the request is read, never throw.
  auto r = parse_chat_request(
      R"({"messages":[{"role":"user","content":"hi"}],"stream":null,"stream_options":{"include_usage":"yes"}})");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->stream);
  EXPECT_FALSE(r->include_usage);
  r = parse_chat_request(R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":2147483647})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->max_tokens, 2147483647);
  r = parse_chat_request(R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":-1})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->max_tokens, -1);
}

}  // namespace
}  // namespace kvgate::gateway

namespace kvgate::gateway {
namespace {

// The fields that name a conversation are ids kvgate keeps (request_checks.h).
TEST(ChatRequestTest, ConversationIdsInTheBodyAreChecked) {
  const std::string msg = R"({"messages":[{"role":"user","content":"x"}],)";
  EXPECT_FALSE(parse(msg + R"("user":"agent-1","prompt_cache_key":"cache/7"})"));
  for (const char* field : {"user", "prompt_cache_key"}) {
    for (const std::string& value : {std::string(R"("u\u0001x")"), std::string(R"("\u001b[2J")"),
                                     "\"" + std::string(1025, 'u') + "\""}) {
      auto err = parse(msg + "\"" + field + "\":" + value + "}");
      ASSERT_TRUE(err) << field << " " << value.substr(0, 20);
      EXPECT_EQ(err->param, std::string(field));
      EXPECT_EQ(err->code, "invalid_id");
    }
  }
}

}  // namespace
}  // namespace kvgate::gateway

namespace kvgate::gateway {
namespace {

// At most 20 alternatives per token, as OpenAI's API allows.
TEST(ChatRequestTest, AlternativesPerTokenAreBounded) {
  const std::string msg = R"({"messages":[{"role":"user","content":"x"}],"logprobs":true,)";
  for (const char* ok : {R"("top_logprobs":0})", R"("top_logprobs":5})", R"("top_logprobs":20})",
                         R"("top_logprobs":null})", R"("n_probs":20})"}) {
    EXPECT_FALSE(parse(msg + ok)) << ok;
  }
  for (const auto& [field, value] : std::vector<std::pair<std::string, std::string>>{
           {"top_logprobs", "21"},
           {"top_logprobs", "1000000"},
           {"top_logprobs", "-1"},
           {"top_logprobs", "18446744073709551615"},
           {"top_logprobs", "\"5\""},
           {"top_logprobs", "5.5"},
           {"n_probs", "1000000"},
       }) {
    auto err = parse(msg + "\"" + field + "\":" + value + "}");
    ASSERT_TRUE(err) << field << "=" << value;
    EXPECT_EQ(err->status, 400);
    EXPECT_EQ(err->param, field);
  }
  // The completions API's `logprobs` is the count itself.
  auto completion = [](const std::string& fields) {
    return validate_completion_body(nlohmann::json::parse(R"({"prompt":"x",)" + fields + "}"));
  };
  EXPECT_TRUE(completion(R"("logprobs":5)").ok());
  EXPECT_TRUE(completion(R"("logprobs":true)").ok());
  EXPECT_TRUE(completion(R"("n_probs":20)").ok());
  for (const char* field : {"logprobs", "n_probs", "top_logprobs"}) {
    auto r = completion(fmt::format(R"("{}":1000000)", field));
    ASSERT_FALSE(r.ok()) << field;
    EXPECT_EQ(r.error().param, std::string(field));
    EXPECT_EQ(r.error().message, fmt::format("{} must be from 0 to 20", field));
  }
}

}  // namespace
}  // namespace kvgate::gateway
