#include "gateway/rescued_reply.h"

#include <gtest/gtest.h>

namespace kvgate::gateway {
namespace {

using nlohmann::json;

Rescue with_call(std::string content) {
  Rescue r;
  r.message = {{"role", "assistant"},
               {"content", std::move(content)},
               {"tool_calls", {{{"id", "call_3"}, {"type", "function"},
                                {"function", {{"name", "read"}, {"arguments", "{\"path\":\"a\"}"}}}}}}};
  r.finish_reason = "tool_calls";
  r.prompt_tokens = 40;
  r.cached_tokens = 39;
  r.completion_tokens = 5;
  r.calls = 1;
  return r;
}

TEST(RescuedReplyTest, TheStreamEndsWithWhatWasNotStreamedTheCallsAndTheFinish) {
  const auto chunks = rescued_chunks(with_call("Let me look at it."), "Let me", "chatcmpl-x", "m", 7, true);
  ASSERT_EQ(chunks.size(), 4u);
  EXPECT_EQ(chunks[0]["choices"][0]["delta"]["content"], " look at it.");
  const json& call = chunks[1]["choices"][0]["delta"]["tool_calls"][0];
  EXPECT_EQ(call["index"], 0);
  EXPECT_EQ(call["id"], "call_3");
  EXPECT_EQ(chunks[2]["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(chunks[3]["choices"], json::array());
  EXPECT_EQ(chunks[3]["usage"]["total_tokens"], 45);
  for (const auto& c : chunks) {
    EXPECT_EQ(c["id"], "chatcmpl-x");
    EXPECT_EQ(c["object"], "chat.completion.chunk");
    EXPECT_EQ(c["created"], 7);
  }
  // Content that does not continue what was streamed is not sent again; no usage unasked.
  const auto other = rescued_chunks(with_call("Something else"), "Let me", "chatcmpl-x", "m", 7, false);
  ASSERT_EQ(other.size(), 2u);
  EXPECT_TRUE(other[0]["choices"][0]["delta"].contains("tool_calls"));
}

TEST(RescuedReplyTest, TheWholeAnswerIsMarkedRescued) {
  json r = rescued_response(with_call(""), "m", 7);
  EXPECT_EQ(r["object"], "chat.completion");
  EXPECT_EQ(r["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(r["usage"]["prompt_tokens_details"]["cached_tokens"], 39);
  EXPECT_EQ(r["kvgate"], json({{"rescued", true}}));
  Rescue raw;
  raw.raw = true;
  EXPECT_EQ(rescued_response(raw, "m", 7)["kvgate"], json({{"rescued", true}, {"raw", true}}));
  EXPECT_EQ(length_finish_chunk("c", "m", 7)["choices"][0]["finish_reason"], "length");
}

TEST(RescuedReplyTest, ArgumentsThatAreNotAJsonObjectAreUnusable) {
  auto answer = [](json arguments) {
    return json{{"choices", {{{"message", {{"tool_calls", {{{"function", {{"name", "f"}, {"arguments", arguments}}}}}}}}}}}};
  };
  EXPECT_FALSE(has_unusable_arguments(answer("{\"a\": 1}")));
  EXPECT_TRUE(has_unusable_arguments(answer("{\"a\": 1")));
  EXPECT_TRUE(has_unusable_arguments(answer("[1]")));
  EXPECT_TRUE(has_unusable_arguments(answer(json::object())));  // not a string
  EXPECT_FALSE(has_unusable_arguments(json{{"choices", {{{"message", {{"content", "hi"}}}}}}}));
  EXPECT_FALSE(has_unusable_arguments(json::object()));
}

}  // namespace
}  // namespace kvgate::gateway
