#include "wire/responses_stream.h"

#include <gtest/gtest.h>

#include "wire/responses_reply.h"
#include "testing/wire_support.h"

namespace kvgate::wire {
namespace {

using nlohmann::json;
using testing::Event;

ResponsesConversion conversion() {
  auto c = responses_to_chat(ClientJson::parse(R"({"model": "gpt-x", "input": "q", "stream": true})"),
                             json::array());
  EXPECT_TRUE(c.ok());
  return c.ok() ? std::move(c).value() : ResponsesConversion{};
}

TEST(ResponsesStreamTest, EventsForAReasoningTextAndCallReply) {
  ResponsesStream s(conversion(), "resp_7", 1000);
  const std::vector<json> chunks = {
      json::parse(R"({"id": "c", "choices": [{"index": 0, "delta": {"reasoning_content": "think"}}]})"),
      json::parse(R"({"id": "c", "choices": [{"index": 0, "delta": {"content": "ok"}}]})"),
      json::parse(
          R"({"id": "c", "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_1",
        "type": "function", "function": {"name": "ls", "arguments": "{}"}}]}}]})"),
      json::parse(R"({"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 4}, "timings": {"cache_n": 5, "prompt_n": 4}})")};
  const std::vector<Event> events = testing::parse_events(testing::encode(s, chunks));
  EXPECT_EQ(testing::event_names(events),
            (std::vector<std::string>{
                "response.created", "response.in_progress", "response.output_item.added",
                "response.content_part.added", "response.reasoning_text.delta",
                "response.reasoning_text.done", "response.content_part.done", "response.output_item.done",
                "response.output_item.added", "response.content_part.added", "response.output_text.delta",
                "response.output_text.done", "response.content_part.done", "response.output_item.done",
                "response.output_item.added", "response.function_call_arguments.delta",
                "response.function_call_arguments.done", "response.output_item.done", "response.completed"}));
  EXPECT_EQ(events[0].data["response"]["status"], "in_progress");
  EXPECT_EQ(events[0].data["response"]["output"], ClientJson::array());
  EXPECT_EQ(events[10].data,
            ClientJson::parse(R"({"type": "response.output_text.delta", "sequence_number": 10,
    "item_id": "msg_7_1", "output_index": 1, "content_index": 0, "delta": "ok", "logprobs": []})"));
  EXPECT_EQ(events[14].data,
            ClientJson::parse(R"({"type": "response.output_item.added", "sequence_number": 14,
    "output_index": 2, "item": {"id": "fc_7_2", "type": "function_call", "status": "in_progress", "arguments": "",
    "call_id": "call_1", "name": "ls"}})"));
  const ClientJson& done = events.back().data["response"];
  EXPECT_EQ(done["status"], "completed");
  EXPECT_EQ(done["usage"]["input_tokens_details"]["cached_tokens"], 5);
  EXPECT_EQ(done, s.response());
  testing::accumulate_responses(events);
}

TEST(ResponsesStreamTest, LengthEndsIncomplete) {
  ResponsesStream s(conversion(), "resp_8", 1);
  const auto events = testing::parse_events(testing::encode(
      s, {json::parse(R"({"choices": [{"index": 0,
    "delta": {"content": "abc"}}]})"),
          json::parse(R"({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]})")}));
  const ClientJson r = testing::accumulate_responses(events);
  EXPECT_EQ(events.back().name, "response.incomplete");
  EXPECT_EQ(r["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(r["output"][0]["status"], "incomplete");
}

TEST(ResponsesStreamTest, FailedEndsTheStream) {
  ResponsesStream s(conversion(), "resp_9", 1);
  std::vector<std::string> sse = s.start();
  for (std::string& e :
       s.on_chunk(json::parse(R"({"choices": [{"index": 0, "delta": {"content": "par"}}]})"))) {
    sse.push_back(std::move(e));
  }
  for (std::string& e :
       s.failed(WireError{.status = 503, .type = "server_error", .message = "engine lost", .param = ""})) {
    sse.push_back(std::move(e));
  }
  EXPECT_TRUE(s.finish().empty());
  EXPECT_TRUE(s.on_chunk(json::parse(R"({"choices": [{"index": 0, "delta": {"content": "x"}}]})")).empty());
  const auto events = testing::parse_events(sse);
  const ClientJson r = testing::accumulate_responses(events);
  EXPECT_EQ(r["status"], "failed");
  EXPECT_EQ(r["error"], ClientJson::parse(R"({"code": "server_error", "message": "engine lost"})"));
  ResponsesStream limited(conversion(), "resp_10", 1);
  const auto rate = testing::parse_events(
      limited.failed(WireError{.status = 429, .type = "", .message = "m", .param = ""}));
  EXPECT_EQ(testing::event_names(rate),
            (std::vector<std::string>{"response.created", "response.in_progress", "response.failed"}));
  EXPECT_EQ(rate.back().data["response"]["error"]["code"], "rate_limit_exceeded");
}

TEST(ResponsesStreamTest, AccumulatesToTheNonStreamedResponse) {
  std::mt19937 rng(13);
  const ResponsesConversion c = conversion();
  for (int round = 0; round < 400; ++round) {
    const testing::ReplySpec spec = testing::random_reply(rng);
    testing::ChunkOptions options;
    options.interleave_calls = round % 2 == 1;
    options.noise = round % 3 == 0;
    options.usage_in_finish = round % 4 == 0;
    options.omit_finish = round % 7 == 0;
    options.omit_usage = round % 11 == 0;
    ResponsesStream s(c, "resp_r", 77);
    ClientJson streamed = testing::accumulate_responses(
        testing::parse_events(testing::encode(s, testing::chunks_for(spec, rng, options))));
    ClientJson whole = chat_to_response(testing::chat_response(spec), c, "resp_r", 77);
    if (options.interleave_calls) {
      streamed["output"] = testing::calls_in_id_order(streamed["output"]);
      whole["output"] = testing::calls_in_id_order(whole["output"]);
    }
    if (!options.omit_finish && !options.omit_usage) {
      EXPECT_EQ(streamed, whole) << "round " << round;
    } else {
      EXPECT_EQ(streamed["output"].size(), whole["output"].size()) << "round " << round;
    }
  }
}

}  // namespace
}  // namespace kvgate::wire
