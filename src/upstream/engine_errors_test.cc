#include "upstream/engine_errors.h"

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "upstream/finish_reason.h"
#include "upstream/reply.h"
#include "upstream/slot_listing.h"
#include "testing/paths.h"

namespace kvgate::gateway {
namespace {

using nlohmann::json;

// Bodies as the real builds sent them: ik 8337e4cd3 (CPU) and the pinned mainline.
constexpr const char* kIkPromptTooLong =
    R"({"error":{"code":500,"message":"the request exceeds the available context size, try increasing it","type":"server_error"}})";
constexpr const char* kIkContextFilled =
    R"({"error":{"code":500,"message":"context_length_exceeded: the request exceeds the available context size; context shift is disabled","type":"server_error"}})";
constexpr const char* kIkBadUtf8 =
    R"({"error":{"code":500,"message":"[json.exception.type_error.316] invalid UTF-8 byte at index 2: 0x2D","type":"server_error"}})";
constexpr const char* kMainlineOverflow =
    R"({"error":{"code":400,"message":"request (5000 tokens) exceeds the available context size (4096 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":5000,"n_ctx":4096}})";

// tests/fixtures/ik/error-*.json, recorded from the real build (scripts/record-ik-fixtures.sh).
std::string ik_fixture(const std::string& name) {
  std::ifstream in(std::string(kvgate::testing::source_dir()) + "/tests/fixtures/ik/error-" + name + ".json", std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(EngineErrorsTest, RecordedIkBodies) {
  EXPECT_EQ(classify_engine_error(500, ik_fixture("prompt-exceeds-context")).kind, EngineErrorKind::kPromptTooLong);
  EXPECT_EQ(classify_engine_error(500, ik_fixture("context-filled-generating")).kind, EngineErrorKind::kContextFilled);
  EXPECT_EQ(classify_engine_error(500, ik_fixture("invalid-utf8-output")).kind, EngineErrorKind::kOutput);
  EXPECT_EQ(classify_engine_error(500, ik_fixture("invalid-utf8-output-chat")).kind, EngineErrorKind::kOutput);
}

TEST(EngineErrorsTest, BothForksFormats) {
  EXPECT_EQ(classify_engine_error(500, kIkPromptTooLong).kind, EngineErrorKind::kPromptTooLong);
  EXPECT_EQ(classify_engine_error(500, kIkContextFilled).kind, EngineErrorKind::kContextFilled);
  EXPECT_EQ(classify_engine_error(500, kIkBadUtf8).kind, EngineErrorKind::kOutput);
  auto m = classify_engine_error(400, kMainlineOverflow);
  EXPECT_EQ(m.kind, EngineErrorKind::kPromptTooLong);
  EXPECT_EQ(m.prompt_tokens, 5000u);
  EXPECT_EQ(m.n_ctx, 4096u);
  EXPECT_EQ(classify_engine_error(500, R"({"error":{"message":"The model produced output that does not match the expected peg-native format"}})").kind,
            EngineErrorKind::kOutput);
  EXPECT_EQ(classify_engine_error(500, R"({"error":{"message":"While executing CallExpression at line 3"}})").kind,
            EngineErrorKind::kTemplate);
  // Not explained by the request: possibly an engine in trouble.
  EXPECT_EQ(classify_engine_error(500, R"({"error":{"message":"slot unavailable"}})").kind, EngineErrorKind::kOther);
  EXPECT_EQ(classify_engine_error(503, "<html>bad gateway</html>").kind, EngineErrorKind::kOther);
  // A 4xx is never the output (the request was refused before generating).
  EXPECT_EQ(classify_engine_error(400, kIkBadUtf8).kind, EngineErrorKind::kOther);
  // Garbage never throws.
  for (const char* b : {"", "{", "null", R"({"error":7})", R"({"error":{"message":7,"n_ctx":-1}})"}) {
    (void)classify_engine_error(500, b);
  }
}

// OpenAI-compatible servers behind kvgate serve: their words for a prompt too long, in the
// shapes their sources format them (vLLM before 0.10 answered the error object as the body).
TEST(EngineErrorsTest, VllmAndSglangOverflowsWithTheirFigures) {
  auto vllm_old = classify_engine_error(
      400,
      R"({"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5100 tokens (5000 in the messages, 100 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400})");
  EXPECT_EQ(vllm_old.kind, EngineErrorKind::kPromptTooLong);
  EXPECT_EQ(vllm_old.n_ctx, 4096u);
  EXPECT_EQ(vllm_old.prompt_tokens, 5000u);
  auto vllm_new = classify_engine_error(
      400,
      R"({"error":{"message":"This model's maximum context length is 16384 tokens. However, you requested 8192 output tokens and your prompt contains at least 8193 input tokens, for a total of at least 16385 tokens.","type":"BadRequestError","param":null,"code":400}})");
  EXPECT_EQ(vllm_new.kind, EngineErrorKind::kPromptTooLong);
  EXPECT_EQ(vllm_new.n_ctx, 16384u);
  EXPECT_EQ(vllm_new.prompt_tokens, 8193u);
  auto sglang = classify_engine_error(
      400,
      R"({"object":"error","message":"The input (9000 tokens) is longer than the model's context length (8192 tokens).","type":"BadRequestError","param":null,"code":400})");
  EXPECT_EQ(sglang.kind, EngineErrorKind::kPromptTooLong);
  EXPECT_EQ(sglang.prompt_tokens, 9000u);
  EXPECT_EQ(sglang.n_ctx, 8192u);
  // Figures it does not give stay 0; other errors are not overflows.
  auto bare = classify_engine_error(
      400, R"({"error":{"message":"This model's maximum context length is 8192 tokens"}})");
  EXPECT_EQ(bare.kind, EngineErrorKind::kPromptTooLong);
  EXPECT_EQ(bare.n_ctx, 8192u);
  EXPECT_EQ(bare.prompt_tokens, 0u);
  EXPECT_EQ(
      classify_engine_error(400, R"({"object":"error","message":"max_tokens must be at least 1"})").kind,
      EngineErrorKind::kOther);
}

TEST(CompletionFiguresTest, MainlineAndIkFinalEvents) {
  // mainline: timings.cache_n
  auto m = completion_figures(json::parse(R"({"stop":true,"timings":{"cache_n":2486,"prompt_n":118,"predicted_n":40}})"));
  EXPECT_TRUE(m.known);
  EXPECT_EQ(m.prompt_tokens, 2604u);
  EXPECT_EQ(m.cached_tokens, 2486u);
  EXPECT_EQ(m.generated_tokens, 40u);
  // ik: tokens_evaluated is the prompt; tokens_cached counts the generated tokens too.
  auto ik = completion_figures(json::parse(
      R"({"stop":true,"tokens_evaluated":10,"tokens_cached":12,"tokens_predicted":3,"timings":{"prompt_n":1,"predicted_n":3,"n_past":12}})"));
  EXPECT_TRUE(ik.known);
  EXPECT_EQ(ik.prompt_tokens, 10u);
  EXPECT_EQ(ik.cached_tokens, 9u);
  EXPECT_EQ(ik.generated_tokens, 3u);
  EXPECT_FALSE(completion_figures(json::parse(R"({"content":"x"})")).known);
}

TEST(FinishReasonFixTest, IkStopAtTheLimitIsLength) {
  const json request = {{"max_tokens", 3}};
  json response = json::parse(
      R"({"choices":[{"finish_reason":"stop","index":0,"message":{"content":"a b c"}}],"usage":{"completion_tokens":3}})");
  FinishReasonFix fix(true, request);
  fix.fix_response(response);
  EXPECT_EQ(response["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(fix.rewrote());
  // Below the limit the model stopped on its own.
  json early = json::parse(R"({"choices":[{"finish_reason":"stop"}],"usage":{"completion_tokens":2}})");
  FinishReasonFix fix2(true, request);
  fix2.fix_response(early);
  EXPECT_EQ(early["choices"][0]["finish_reason"], "stop");
  // Mainline is left alone; so is a request without a limit.
  json same = response;
  same["choices"][0]["finish_reason"] = "stop";
  FinishReasonFix off(false, request);
  off.fix_response(same);
  EXPECT_EQ(same["choices"][0]["finish_reason"], "stop");
  FinishReasonFix unlimited(true, json::object());
  unlimited.fix_response(same);
  EXPECT_EQ(same["choices"][0]["finish_reason"], "stop");
}

TEST(FinishReasonFixTest, StreamedFinishHeldUntilTheUsage) {
  FinishReasonFix fix(true, {{"max_tokens", 3}});
  auto ev = [](const json& j) { return "data: " + j.dump() + "\n\n"; };
  const json content = json::parse(R"({"choices":[{"delta":{"content":"x"},"finish_reason":null}]})");
  const json finish = json::parse(R"({"choices":[{"delta":{},"finish_reason":"stop","index":0}]})");
  const json usage = json::parse(R"({"choices":[],"usage":{"completion_tokens":3,"prompt_tokens":9}})");
  EXPECT_EQ(fix.on_chunk(content, ev(content), true).size(), 1u);
  EXPECT_TRUE(fix.on_chunk(finish, ev(finish), true).empty());  // held
  auto out = fix.on_chunk(usage, ev(usage), /*forward=*/false);  // the client did not ask for usage
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].raw.empty());  // rewritten: written anew
  EXPECT_EQ(out[0].chunk["choices"][0]["finish_reason"], "length") << out[0].chunk.dump();
  EXPECT_TRUE(fix.flush().empty());
  // Without a later event, the held chunk goes out unchanged at the end.
  FinishReasonFix fix2(true, {{"max_tokens", 3}});
  EXPECT_TRUE(fix2.on_chunk(finish, ev(finish), true).empty());
  auto rest = fix2.flush();
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0].raw, ev(finish));
  EXPECT_EQ(rest[0].chunk, finish);
  // A finish chunk carrying its own count (ik without usage: timings.predicted_n) is decided at once.
  FinishReasonFix fix3(true, {{"max_tokens", 3}});
  json timed = finish;
  timed["timings"] = {{"predicted_n", 3}};
  auto now = fix3.on_chunk(timed, ev(timed), true);
  ASSERT_EQ(now.size(), 1u);
  EXPECT_TRUE(now[0].raw.empty());
  EXPECT_EQ(now[0].chunk["choices"][0]["finish_reason"], "length");
}

}  // namespace
}  // namespace kvgate::gateway

namespace kvgate::gateway {
namespace {

TEST(SlotListingTest, OnlyNumbersFlagsAndTheModelPass) {
  // The shape of ik 8337e4cd3's /slots entry (trimmed), and mainline's is_processing.
  const json ik = json::parse(R"([{"n_ctx":4096,"model":"m.gguf","temperature":0.8,"stop":["secret stop"],
      "grammar":"root ::= \"secret\"","logit_bias":[[5,1.0]],"id":0,"id_task":12,"state":0,
      "prompt":"<|im_start|>user\nsecret<|im_end|>","chat_format":"peg-native",
      "next_token":{"has_next_token":false,"n_remain":0,"n_decoded":3,"stopping_word":"secret"},
      "is_processing":false}])");
  const json out = slots_without_content(ik);
  ASSERT_EQ(out.size(), 1U);
  EXPECT_EQ(out.dump().find("secret"), std::string::npos) << out.dump();
  EXPECT_EQ(out[0]["n_ctx"], 4096);
  EXPECT_EQ(out[0]["id"], 0);
  EXPECT_EQ(out[0]["state"], 0);
  EXPECT_EQ(out[0]["model"], "m.gguf");
  EXPECT_EQ(out[0]["is_processing"], false);
  EXPECT_EQ(out[0]["next_token"]["n_decoded"], 3);
  EXPECT_FALSE(out[0].contains("prompt"));
  EXPECT_FALSE(out[0].contains("stop"));
  EXPECT_TRUE(slots_without_content(json::parse(R"({"error":"x"})")).empty());
  EXPECT_TRUE(slots_without_content(json()).empty());
}

}  // namespace
}  // namespace kvgate::gateway
