#include "wire/anthropic_reply.h"

#include <gtest/gtest.h>

#include "wire/anthropic_request.h"

namespace kvgate::wire {
namespace {

using nlohmann::json;

const char* const kReply = R"({
  "id": "chatcmpl-7Xq", "object": "chat.completion", "created": 1, "model": "m",
  "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
    "role": "assistant", "content": "Let me look.", "reasoning_content": "The file first.",
    "tool_calls": [
      {"type": "function", "id": "call_1", "function": {"name": "read_file", "arguments": "{\"path\":\"a.txt\",\"limit\":10}"}},
      {"type": "function", "id": "call_2", "function": {"name": "ls", "arguments": "{}"}}]}}],
  "usage": {"prompt_tokens": 1200, "completion_tokens": 40, "total_tokens": 1240},
  "timings": {"cache_n": 1000, "prompt_n": 200, "predicted_n": 40}})";

TEST(AnthropicReplyTest, ChatCompletionBecomesAMessage) {
  const ClientJson m = chat_to_message(json::parse(kReply), "claude-sonnet");
  EXPECT_EQ(m, ClientJson::parse(R"({
    "id": "msg_7Xq", "type": "message", "role": "assistant", "model": "claude-sonnet",
    "content": [
      {"type": "thinking", "thinking": "The file first.", "signature": ""},
      {"type": "text", "text": "Let me look."},
      {"type": "tool_use", "id": "call_1", "name": "read_file", "input": {"path": "a.txt", "limit": 10}},
      {"type": "tool_use", "id": "call_2", "name": "ls", "input": {}}],
    "stop_reason": "tool_use", "stop_sequence": null,
    "usage": {"input_tokens": 200, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 1000,
              "output_tokens": 40}})"));
  // Key order of the input is the model's, not alphabetical.
  EXPECT_EQ(m["content"][2]["input"].begin().key(), "path");
}

TEST(AnthropicReplyTest, StopReasons) {
  EXPECT_EQ(anthropic_stop_reason("stop", false, ""), "end_turn");
  EXPECT_EQ(anthropic_stop_reason("", false, ""), "end_turn");
  EXPECT_EQ(anthropic_stop_reason("length", false, ""), "max_tokens");
  EXPECT_EQ(anthropic_stop_reason("length", true, ""), "max_tokens");
  EXPECT_EQ(anthropic_stop_reason("tool_calls", true, ""), "tool_use");
  EXPECT_EQ(anthropic_stop_reason("stop", true, ""), "tool_use");
  EXPECT_EQ(anthropic_stop_reason("content_filter", false, ""), "refusal");
  EXPECT_EQ(anthropic_stop_reason("stop", false, "END"), "stop_sequence");
  EXPECT_EQ(anthropic_stop_sequence("stop", false, "END"), "END");
  EXPECT_EQ(anthropic_stop_sequence("stop", false, ""), nullptr);
  EXPECT_EQ(anthropic_stop_sequence("length", false, "END"), nullptr);
}

// llama-server names the stop string only in the __verbose object a request with
// "verbose": true gets.
TEST(AnthropicReplyTest, AStopWordTheEngineReportsIsTheStopSequence) {
  const ClientJson m = chat_to_message(json::parse(R"({"id": "chatcmpl-s", "choices": [{"index": 0,
    "finish_reason": "stop", "message": {"role": "assistant", "content": "one two"}}],
    "__verbose": {"stop_type": "word", "stopping_word": "three", "content": "one two"}})"),
                                       "m");
  EXPECT_EQ(m["stop_reason"], "stop_sequence");
  EXPECT_EQ(m["stop_sequence"], "three");
  const ClientJson eos = chat_to_message(json::parse(R"({"id": "chatcmpl-s", "choices": [{"index": 0,
    "finish_reason": "stop", "message": {"role": "assistant", "content": "one"}}],
    "__verbose": {"stop_type": "eos", "stopping_word": ""}})"),
                                         "m");
  EXPECT_EQ(eos["stop_reason"], "end_turn");
  EXPECT_EQ(eos["stop_sequence"], nullptr);
}

TEST(AnthropicReplyTest, ArgumentsThatAreNotAnObjectGiveAnEmptyInput) {
  EXPECT_EQ(tool_input("{\"b\":1,\"a\":2}").dump(), "{\"b\":1,\"a\":2}");
  EXPECT_EQ(tool_input("{\"path\": \"a"), ClientJson::object());
  EXPECT_EQ(tool_input("[1,2]"), ClientJson::object());
  EXPECT_EQ(tool_input(""), ClientJson::object());
  EXPECT_EQ(tool_input("\"text\""), ClientJson::object());
}

TEST(AnthropicReplyTest, EmptyAndOddRepliesStillGiveAMessage) {
  const ClientJson empty = chat_to_message(json::parse(R"({"id": "chatcmpl-e", "choices": [{"index": 0,
    "finish_reason": "length", "message": {"role": "assistant", "content": ""}}]})"),
                                           "m");
  EXPECT_EQ(empty["content"], ClientJson::array());
  EXPECT_EQ(empty["stop_reason"], "max_tokens");
  EXPECT_EQ(empty["usage"]["input_tokens"], 0);
  for (const char* odd : {"null", "[]", R"({"choices": []})", R"({"choices": [{"message": "x"}]})"}) {
    const ClientJson m = chat_to_message(json::parse(odd), "m");
    EXPECT_EQ(m["type"], "message") << odd;
    EXPECT_EQ(m["content"], ClientJson::array()) << odd;
  }
}

// A reply sent back as the next request's history gives the engine the message it wrote.
TEST(AnthropicReplyTest, MessageRoundTripsAsHistory) {
  const json reply = json::parse(kReply);
  const ClientJson message = chat_to_message(reply, "m");
  ClientJson request = {
      {"max_tokens", 10},
      {"messages",
       {{{"role", "user"}, {"content", "read it"}},
        {{"role", "assistant"}, {"content", message["content"]}},
        {{"role", "user"},
         {"content",
          {{{"type", "tool_result"}, {"tool_use_id", message["content"][2]["id"]}, {"content", "x"}},
           {{"type", "tool_result"}, {"tool_use_id", message["content"][3]["id"]}, {"content", "y"}}}}}}}};
  auto c = messages_to_chat(request);
  ASSERT_TRUE(c.ok()) << c.error().message;
  json expected = reply["choices"][0]["message"];
  expected.erase("reasoning_content");  // historical reasoning is dropped
  EXPECT_EQ(c->chat["messages"][1], expected);
  EXPECT_EQ(c->chat["messages"][2],
            json::parse(R"({"role": "tool", "tool_call_id": "call_1", "content": "x"})"));
  EXPECT_EQ(c->chat["messages"][3],
            json::parse(R"({"role": "tool", "tool_call_id": "call_2", "content": "y"})"));
}

TEST(AnthropicReplyTest, ErrorsByStatus) {
  struct Case {
    int status;
    int answered;
    const char* type;
  };
  const Case cases[] = {{400, 400, "invalid_request_error"},
                        {401, 401, "authentication_error"},
                        {403, 403, "permission_error"},
                        {404, 404, "not_found_error"},
                        {405, 405, "invalid_request_error"},
                        {413, 413, "request_too_large"},
                        {429, 429, "rate_limit_error"},
                        {500, 500, "api_error"},
                        {502, 502, "api_error"},
                        {503, 529, "overloaded_error"},
                        {504, 504, "timeout_error"},
                        {200, 500, "api_error"}};
  for (const Case& c : cases) {
    const WireError e = anthropic_error(c.status, "boom");
    EXPECT_EQ(e.status, c.answered) << c.status;
    EXPECT_EQ(e.type, c.type) << c.status;
    EXPECT_EQ(e.message, "boom");
  }
  EXPECT_EQ(anthropic_error_body(anthropic_error(429, "slow down")),
            ClientJson::parse(
                R"({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}})"));
  const WireError relayed = anthropic_error_from_openai(
      400,
      json::parse(R"({"error": {"message": "the request exceeds the context", "type": "invalid_request_error",
                                     "code": "context_length_exceeded"}})"));
  EXPECT_EQ(relayed.message, "the request exceeds the context");
  EXPECT_EQ(relayed.type, "invalid_request_error");
  const WireError bare = anthropic_error_from_openai(503, json("busy"));
  EXPECT_EQ(bare.status, 529);
  EXPECT_FALSE(bare.message.empty());
}

}  // namespace
}  // namespace kvgate::wire
