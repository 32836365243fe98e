#include "bench/failure.h"

#include <gtest/gtest.h>

namespace kvgate::bench {
namespace {

using nlohmann::json;

TEST(FailureTest, Classes) {
  // Mainline's overflow answer.
  const json mainline = json::parse(
      R"({"error":{"code":400,"message":"request (9000 tokens) exceeds the available context size (8192 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":9000,"n_ctx":8192}})");
  EXPECT_EQ(classify_failure(400, "", mainline).kind, FailureKind::kContextOverflow);
  // kvgate's own.
  const json kvgate = {{"error",
                        {{"message", "does not fit"},
                         {"type", "invalid_request_error"},
                         {"code", "context_length_exceeded"}}}};
  EXPECT_EQ(classify_failure(400, "", kvgate).kind, FailureKind::kContextOverflow);
  // ik_llama.cpp: a 500 with the message only.
  EXPECT_EQ(classify_failure(500, "", json{{"error", "the request exceeds the available context size"}}).kind,
            FailureKind::kContextOverflow);
  // The engine's output parser.
  const json parse = {
      {"error",
       {{"code", 500},
        {"message",
         "Failed to parse input at pos 12: the output does not match the expected tool call format"},
        {"type", "server_error"}}}};
  const Failure f = classify_failure(500, "", parse);
  EXPECT_EQ(f.kind, FailureKind::kOutputParse);
  EXPECT_NE(f.message.find("pos 12"), std::string::npos);
  EXPECT_EQ(
      classify_failure(500, "", json{{"error", {{"code", "output_parse_error"}, {"message", "x"}}}}).kind,
      FailureKind::kOutputParse);
  // Anything else.
  EXPECT_EQ(classify_failure(503, "", json{{"error", {{"message", "engine restarting"}}}}).kind,
            FailureKind::kEngineError);
  EXPECT_EQ(classify_failure(502, "", nullptr).kind, FailureKind::kEngineError);
  EXPECT_EQ(classify_failure(502, "", nullptr).message, "HTTP 502");
  // An in-stream error event after a 200.
  EXPECT_EQ(classify_failure(200, "", json("the stream ended without [DONE]")).kind,
            FailureKind::kEngineError);
  // No answer.
  EXPECT_EQ(classify_failure(0, "Connection", nullptr).kind, FailureKind::kTransport);
  EXPECT_EQ(classify_failure(0, "", nullptr).kind, FailureKind::kTransport);
  // Success.
  EXPECT_EQ(classify_failure(200, "", nullptr).kind, FailureKind::kNone);
  EXPECT_EQ(classify_failure(200, "", json::object()).kind, FailureKind::kNone);
  EXPECT_STREQ(failure_name(FailureKind::kContextOverflow), "context_overflow");
}

}  // namespace
}  // namespace kvgate::bench
