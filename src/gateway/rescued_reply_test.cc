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
  r.usage = {.prompt_tokens = 40, .cached_tokens = 39, .prefilled_tokens = 2, .completion_tokens = 5, .known = true};
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
  EXPECT_EQ(chunks[3]["usage"]["prompt_tokens_details"]["cached_tokens"], 39);
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

// A cold prompt the refused attempt computed whole: the turn's cache is that attempt's (the
// replay read its prompt back from the cache, which is not this turn's reuse), and the
// replay's prefill is computed work.
TEST(RescuedReplyTest, TheFiguresAreTheRefusedAttemptsPrefillAndTheReplaysWork) {
  const RefusedAttempt cold{.prompt_tokens = 11853, .cached_tokens = 5, .computed_tokens = 11848, .prompt_known = true,
                            .generated_tokens = 17, .generated_known = true};
  const ReplayFigures replay{.computed_tokens = 1, .generated_tokens = 138, .replayed = true};
  const Usage delivered = rescued_usage(cold, replay, true);
  EXPECT_TRUE(delivered.known);
  EXPECT_EQ(delivered.prompt_tokens, 11853u);
  EXPECT_EQ(delivered.cached_tokens, 5u);
  EXPECT_EQ(delivered.prefilled_tokens, 11849u);
  EXPECT_EQ(delivered.completion_tokens, 138u);
  // The client kept the refused attempt's text: its completion.
  EXPECT_EQ(rescued_usage(cold, replay, false).completion_tokens, 17u);
  // Nothing replayed: the refused attempt alone.
  EXPECT_EQ(rescued_usage(cold, {}, true).prefilled_tokens, 11848u);
  EXPECT_EQ(rescued_usage(cold, {}, true).completion_tokens, 17u);
  // No figures of the refused attempt: not known (no literal in their place).
  EXPECT_FALSE(rescued_usage({}, replay, true).known);
  RefusedAttempt no_generation = cold;
  no_generation.generated_known = false;
  EXPECT_FALSE(rescued_usage(no_generation, replay, false).known);
  EXPECT_TRUE(rescued_usage(no_generation, replay, true).known);
}

TEST(RescuedReplyTest, AStreamGetsTheRescuedTextOnlyWhenItContinuesWhatWasStreamed) {
  Rescue r;
  r.message = {{"role", "assistant"}, {"content", "Let me look"}};
  EXPECT_TRUE(rescue_delivered(r, "Let me"));
  EXPECT_TRUE(rescue_delivered(r, "Let me look"));
  EXPECT_TRUE(rescue_delivered(r, ""));
  EXPECT_FALSE(rescue_delivered(r, "Let me see"));
  EXPECT_TRUE(rescue_delivered(with_call("x"), "Let me see"));  // the calls are delivered
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
