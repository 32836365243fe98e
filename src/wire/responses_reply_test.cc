#include "wire/responses_reply.h"

#include <gtest/gtest.h>

namespace kvgate::wire {
namespace {

using nlohmann::json;

const char* const kReply = R"({
  "id": "chatcmpl-9", "object": "chat.completion",
  "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
    "role": "assistant", "content": "Checking.", "reasoning_content": "Need the list.",
    "tool_calls": [{"type": "function", "id": "call_x", "function": {"name": "ls", "arguments": "{\"dir\":\".\"}"}}]}}],
  "usage": {"prompt_tokens": 300, "completion_tokens": 25, "total_tokens": 325},
  "timings": {"cache_n": 256, "prompt_n": 44, "predicted_n": 25}})";

ResponsesConversion conversion(const std::string& request) {
  auto c = responses_to_chat(ClientJson::parse(request), json::array());
  EXPECT_TRUE(c.ok());
  return c.ok() ? std::move(c).value() : ResponsesConversion{};
}

TEST(ResponsesReplyTest, ChatCompletionBecomesAResponse) {
  const ResponsesConversion c = conversion(R"({"model": "gpt-x", "input": "q", "instructions": "I",
    "metadata": {"a": "b"}, "temperature": 0.3})");
  const ClientJson r = chat_to_response(json::parse(kReply), c, "resp_abc", 1750000000);
  EXPECT_EQ(r, ClientJson::parse(R"({
    "id": "resp_abc", "object": "response", "created_at": 1750000000, "status": "completed", "error": null,
    "incomplete_details": null, "instructions": "I", "max_output_tokens": null, "model": "gpt-x",
    "output": [
      {"id": "rs_abc_0", "type": "reasoning", "summary": [],
       "content": [{"type": "reasoning_text", "text": "Need the list."}], "status": "completed"},
      {"id": "msg_abc_1", "type": "message", "status": "completed", "role": "assistant",
       "content": [{"type": "output_text", "text": "Checking.", "annotations": [], "logprobs": []}]},
      {"id": "fc_abc_2", "type": "function_call", "status": "completed", "arguments": "{\"dir\":\".\"}",
       "call_id": "call_x", "name": "ls"}],
    "parallel_tool_calls": true, "previous_response_id": null, "reasoning": {"effort": null, "summary": null},
    "store": true, "temperature": 0.3, "text": {"format": {"type": "text"}}, "tool_choice": "auto", "tools": [],
    "top_p": null, "truncation": "disabled",
    "usage": {"input_tokens": 300, "input_tokens_details": {"cached_tokens": 256}, "output_tokens": 25,
              "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 325},
    "metadata": {"a": "b"}})"));
}

TEST(ResponsesReplyTest, LengthMakesTheResponseAndItsLastItemIncomplete) {
  const ClientJson r = chat_to_response(json::parse(R"({"id": "chatcmpl-1", "choices": [{"index": 0,
    "finish_reason": "length", "message": {"role": "assistant", "content": "cut sho"}}]})"),
                                        conversion(R"({"input": "q"})"), "resp_1", 5);
  EXPECT_EQ(r["status"], "incomplete");
  EXPECT_EQ(r["incomplete_details"], ClientJson::parse(R"({"reason": "max_output_tokens"})"));
  EXPECT_EQ(r["output"][0]["status"], "incomplete");
  EXPECT_TRUE(r["usage"].is_null());
}

TEST(ResponsesReplyTest, OutputRoundTripsToTheChatMessage) {
  const json reply = json::parse(kReply);
  const ClientJson r = chat_to_response(reply, conversion(R"({"input": "q"})"), "resp_abc", 1);
  json expected = reply["choices"][0]["message"];
  expected.erase("reasoning_content");
  EXPECT_EQ(output_to_chat_messages(r), json::array({expected}));
  // And as input items of the next request (a client that keeps the output itself).
  ClientJson next = {{"input", r["output"]}};
  auto c = responses_to_chat(next, json::array());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->chat["messages"], json::array({expected}));
  EXPECT_EQ(output_to_chat_messages(ClientJson::parse(R"({"output": []})")), json::array());
  EXPECT_EQ(output_to_chat_messages(ClientJson::parse(R"("junk")")), json::array());
}

TEST(ResponsesReplyTest, ErrorBodyIsOpenAIs) {
  EXPECT_EQ(responses_error_body(invalid_request("input.0.role", "expected user")),
            ClientJson::parse(
                R"({"error": {"message": "input.0.role: expected user", "type": "invalid_request_error",
                                            "param": "input.0.role", "code": null}})"));
  EXPECT_EQ(responses_error_body(WireError{
                .status = 500, .type = "server_error", .message = "m", .param = ""})["error"]["param"],
            nullptr);
}

}  // namespace
}  // namespace kvgate::wire
