#include "wire/anthropic_stream.h"

#include <gtest/gtest.h>

#include "wire/anthropic_reply.h"
#include "testing/wire_support.h"

namespace kvgate::wire {
namespace {

using nlohmann::json;
using testing::Event;

TEST(AnthropicStreamTest, EventsForATextAndToolReply) {
  MessagesStream s("claude-x", "msg_1");
  const std::vector<json> chunks = {
      json::parse(
          R"({"id": "c", "choices": [{"index": 0, "delta": {"role": "assistant", "content": null}}]})"),
      json::parse(R"({"id": "c", "choices": [{"index": 0, "delta": {"content": "Hi"}}]})"),
      json::parse(
          R"({"id": "c", "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_9",
        "type": "function", "function": {"name": "read", "arguments": "{\"p\":"}}]}}]})"),
      json::parse(R"({"id": "c", "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0,
        "function": {"arguments": "\"a\"}"}}]}}]})"),
      json::parse(R"({"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})"),
      json::parse(R"({"id": "c", "choices": [], "usage": {"prompt_tokens": 50, "completion_tokens": 7},
        "timings": {"cache_n": 40, "prompt_n": 10, "predicted_n": 7}})")};
  const std::vector<Event> events = testing::parse_events(testing::encode(s, chunks));
  EXPECT_EQ(testing::event_names(events),
            (std::vector<std::string>{"message_start", "content_block_start", "content_block_delta",
                                      "content_block_stop", "content_block_start", "content_block_delta",
                                      "content_block_delta", "content_block_stop", "message_delta",
                                      "message_stop"}));
  EXPECT_EQ(events[0].data,
            ClientJson::parse(R"({"type": "message_start", "message": {"id": "msg_1", "type": "message",
    "role": "assistant", "model": "claude-x", "content": [], "stop_reason": null, "stop_sequence": null,
    "usage": {"input_tokens": 0, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 0}}})"));
  EXPECT_EQ(events[1].data, ClientJson::parse(R"({"type": "content_block_start", "index": 0,
    "content_block": {"type": "text", "text": ""}})"));
  EXPECT_EQ(events[2].data, ClientJson::parse(R"({"type": "content_block_delta", "index": 0,
    "delta": {"type": "text_delta", "text": "Hi"}})"));
  EXPECT_EQ(events[4].data, ClientJson::parse(R"({"type": "content_block_start", "index": 1,
    "content_block": {"type": "tool_use", "id": "call_9", "name": "read", "input": {}}})"));
  EXPECT_EQ(events[5].data, ClientJson::parse(R"({"type": "content_block_delta", "index": 1,
    "delta": {"type": "input_json_delta", "partial_json": "{\"p\":"}})"));
  EXPECT_EQ(events[8].data, ClientJson::parse(R"({"type": "message_delta",
    "delta": {"stop_reason": "tool_use", "stop_sequence": null},
    "usage": {"input_tokens": 10, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 40, "output_tokens": 7}})"));
  EXPECT_EQ(events[9].data, ClientJson::parse(R"({"type": "message_stop"})"));
}

TEST(AnthropicStreamTest, MessageDeltaGoesOutOnceFinishAndUsageAreSeen) {
  MessagesStream s("m", "msg_2");
  EXPECT_FALSE(s.start(123).empty());
  EXPECT_TRUE(s.start().empty());
  EXPECT_EQ(s.on_chunk(json::parse(R"({"choices": [{"index": 0, "delta": {"content": "x"}}]})")).size(), 2u);
  EXPECT_EQ(
      s.on_chunk(json::parse(R"({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})")).size(),
      0u);
  const auto last = testing::parse_events(
      s.on_chunk(json::parse(R"({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 1}})")));
  ASSERT_EQ(last.size(), 2u);
  EXPECT_EQ(last[0].name, "content_block_stop");
  EXPECT_EQ(last[1].name, "message_delta");
  EXPECT_EQ(last[1].data["delta"]["stop_reason"], "end_turn");
  EXPECT_TRUE(
      s.on_chunk(json::parse(R"({"choices": [{"index": 0, "delta": {"content": "after"}}]})")).empty());
  const auto end = testing::parse_events(s.finish());
  ASSERT_EQ(end.size(), 1u);
  EXPECT_EQ(end[0].name, "message_stop");
  EXPECT_TRUE(s.finish().empty());
}

// Recorded from the pinned engine: a first chunk can carry timings (the figures so far);
// only the usage chunk at the end is the reply's usage.
TEST(AnthropicStreamTest, TimingsInTheMiddleAreNotTheUsage) {
  MessagesStream s("m", "msg_t");
  s.start();
  EXPECT_EQ(
      s.on_chunk(json::parse(R"({"choices": [{"index": 0, "delta": {"role": "assistant", "content": null}}],
    "timings": {"cache_n": 23, "prompt_n": 1, "predicted_n": 1}})"))
          .size(),
      0u);
  EXPECT_EQ(s.on_chunk(json::parse(R"({"choices": [{"index": 0, "delta": {"content": "a b"}}]})")).size(),
            2u);
  // The finish reason alone does not end the message: the usage is still to come.
  EXPECT_EQ(
      s.on_chunk(json::parse(R"({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})")).size(),
      0u);
  const auto events = testing::parse_events(s.on_chunk(json::parse(R"({"choices": [],
    "usage": {"prompt_tokens": 24, "completion_tokens": 9}, "timings": {"cache_n": 23, "prompt_n": 1, "predicted_n": 9}})")));
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].data["usage"]["output_tokens"], 9);
  EXPECT_EQ(events[1].data["usage"]["cache_read_input_tokens"], 23);
}

TEST(AnthropicStreamTest, FinishAloneGivesACompleteEmptyMessage) {
  MessagesStream s("m", "msg_3");
  const auto events = testing::parse_events(s.finish());
  EXPECT_EQ(testing::event_names(events),
            (std::vector<std::string>{"message_start", "message_delta", "message_stop"}));
  const ClientJson message = testing::accumulate_anthropic(events);
  EXPECT_EQ(message["stop_reason"], "end_turn");
  EXPECT_EQ(message["usage"]["output_tokens"], 0);
}

TEST(AnthropicStreamTest, PingAndError) {
  EXPECT_EQ(MessagesStream::ping(), "event: ping\ndata: {\"type\":\"ping\"}\n\n");
  const auto e = testing::parse_events({MessagesStream::error("overloaded_error", "engine restarting")});
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].name, "error");
  EXPECT_EQ(e[0].data, ClientJson::parse(R"({"type": "error",
    "error": {"type": "overloaded_error", "message": "engine restarting"}})"));
}

// Whatever order and cut the chunks come in, a client accumulates the message the
// non-streamed answer gives.
TEST(AnthropicStreamTest, AccumulatesToTheNonStreamedMessage) {
  std::mt19937 rng(11);
  for (int round = 0; round < 400; ++round) {
    const testing::ReplySpec spec = testing::random_reply(rng);
    testing::ChunkOptions options;
    options.interleave_calls = round % 2 == 1;
    options.noise = round % 3 == 0;
    options.usage_in_finish = round % 4 == 0;
    options.omit_finish = round % 7 == 0;
    options.omit_usage = round % 11 == 0;
    MessagesStream s("m", message_id(spec.id));
    std::vector<std::string> sse = testing::encode(s, testing::chunks_for(spec, rng, options));
    if (round % 5 == 0) sse.insert(sse.begin() + static_cast<long>(sse.size() / 2), MessagesStream::ping());
    const ClientJson streamed = testing::accumulate_anthropic(testing::parse_events(sse));
    const ClientJson whole = chat_to_message(testing::chat_response(spec), "m");
    if (options.interleave_calls) {
      EXPECT_EQ(testing::calls_in_id_order(streamed["content"]), testing::calls_in_id_order(whole["content"]))
          << "round " << round;
    } else {
      EXPECT_EQ(streamed["content"], whole["content"]) << "round " << round;
    }
    EXPECT_EQ(streamed["id"], whole["id"]);
    if (!options.omit_finish) {
      EXPECT_EQ(streamed["stop_reason"], whole["stop_reason"]) << "round " << round;
    }
    if (!options.omit_usage) {
      EXPECT_EQ(streamed["usage"], whole["usage"]) << "round " << round;
    }
  }
}

}  // namespace
}  // namespace kvgate::wire
