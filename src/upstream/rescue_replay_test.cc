#include "upstream/rescue_replay.h"

#include <gtest/gtest.h>

namespace kvgate::gateway {
namespace {

using nlohmann::json;

TEST(RescueReplay, RecognisesOutputParseErrors) {
  EXPECT_TRUE(is_output_parse_error(
      500, "The model produced output that does not match the expected peg-native format"));
  EXPECT_TRUE(is_output_parse_error(500, "Failed to parse input at pos 12"));
  EXPECT_FALSE(is_output_parse_error(400, "The model produced output that does not match the expected x format"));
  EXPECT_FALSE(is_output_parse_error(500, "Failed to parse tool call arguments as JSON"));
}

TEST(RescueReplay, CompletionBodyKeepsSamplingAndDropsChatFields) {
  json chat = json::parse(R"({"messages": [], "tools": [], "tool_choice": "auto", "stream": false,
    "seed": 7, "temperature": 0.6, "top_p": 0.9, "stop": ["END"], "logit_bias": [[1, -5]],
    "max_tokens": 64, "id_slot": 1, "chat_template_kwargs": {"enable_thinking": false},
    "response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "object"}}}})");
  json body = replay_completion_body(chat, "<|im_start|>user\nhi<|im_end|>\n");
  EXPECT_EQ(body, json::parse(R"({"prompt": "<|im_start|>user\nhi<|im_end|>\n", "stream": true,
    "cache_prompt": true, "seed": 7, "temperature": 0.6, "top_p": 0.9, "stop": ["END"],
    "logit_bias": [[1, -5]], "n_predict": 64, "id_slot": 1, "json_schema": {"type": "object"},
    "return_progress": true})"));
  EXPECT_EQ(replay_completion_body(json::parse(R"({"max_completion_tokens": 5, "max_tokens": 9})"), "p")["n_predict"], 5);
  EXPECT_EQ(replay_completion_body(json("junk"), "p"),
            json::parse(R"({"prompt": "p", "stream": true, "cache_prompt": true, "return_progress": true})"));
}

TEST(RescueReplay, StreamTextStopsAtTheError) {
  ReplayText r;
  r.add_event(R"({"index":0,"content":"Hello","tokens":[1],"stop":false,"tokens_predicted":1,"tokens_evaluated":20})");
  r.add_event(R"({"index":0,"content":" wor","stop":false,"tokens_predicted":2,"tokens_evaluated":20})");
  r.add_event("not json");
  r.add_event(R"({"error":{"code":500,"message":"The model produced output that does not match the expected Content-only format"}})");
  r.add_event(R"({"content":"ignored"})");
  EXPECT_EQ(r.text(), "Hello wor");
  EXPECT_TRUE(r.failed());
  EXPECT_FALSE(r.finished());
  EXPECT_EQ(r.tokens_predicted(), 2);
  EXPECT_EQ(r.tokens_evaluated(), 20);
}

TEST(RescueReplay, APromptReadFromTheCacheIsReportedWhenTheOutputIsRefused) {
  // The engine reused 1,319 of 1,320 prompt tokens, then refused the output: its final
  // figures never come, its progress did.
  ReplayText r;
  r.add_event(
      R"({"index":0,"content":"","stop":false,"prompt_progress":{"total":1320,"cache":1319,"processed":1320,"time_ms":3.5}})");
  r.add_event(R"({"index":0,"content":"\u00ff","stop":false,"tokens_predicted":1})");
  r.add_event(
      R"({"error":{"code":500,"message":"The model produced output that does not match the expected peg-native format"}})");
  EXPECT_TRUE(r.failed());
  EXPECT_EQ(r.tokens_evaluated(), 1320);
  EXPECT_EQ(r.tokens_cached(), 1319);
  // The final figures, when they come, are the engine's last word.
  ReplayText done;
  done.add_event(R"({"content":"","stop":false,"prompt_progress":{"total":50,"cache":10,"processed":50}})");
  done.add_event(
      R"({"content":"ok","stop":true,"tokens_predicted":1,"tokens_evaluated":50,"timings":{"cache_n":12,"prompt_n":38}})");
  EXPECT_EQ(done.tokens_cached(), 12);
}

TEST(RescueReplay, StreamTextFinishes) {
  ReplayText r;
  r.add_event(R"({"content":"<tool_call>","stop":false})");
  r.add_event(R"({"content":"","stop":true,"stop_type":"limit","tokens_predicted":32})");
  EXPECT_EQ(r.text(), "<tool_call>");
  EXPECT_TRUE(r.finished());
  EXPECT_TRUE(r.stopped_by_limit());
  EXPECT_EQ(r.tokens_predicted(), 32);
}

}  // namespace
}  // namespace kvgate::gateway
