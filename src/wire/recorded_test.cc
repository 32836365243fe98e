// The adapters over what the pinned llama-server really sends (tests/fixtures/wire, recorded
// by scripts/record-wire-fixtures.py): each scenario was asked twice, non-streamed and
// streamed, so the streamed conversion must accumulate to the non-streamed one (tool-call
// ids and cache hits differ between the two requests); and the engine's own /v1/responses
// answer to the same request is a second reference for the Responses output.
#include <gtest/gtest.h>

#include "wire/anthropic_reply.h"
#include "wire/anthropic_request.h"
#include "wire/anthropic_stream.h"
#include "wire/responses_reply.h"
#include "wire/responses_stream.h"
#include "testing/wire_support.h"

namespace kvgate::wire {
namespace {

using nlohmann::json;

// Tool-call ids are random per request: drop them to compare two requests' answers.
ClientJson without_call_ids(ClientJson blocks) {
  for (ClientJson& b : blocks) {
    if (b["type"] == "tool_use") b.erase("id");
    if (b["type"] == "function_call") b.erase("call_id");
  }
  return blocks;
}

class RecordedTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { fixtures_ = new std::map<std::string, json>(testing::recorded_fixtures()); }
  static void TearDownTestSuite() { delete fixtures_; }
  static const json& fixture(const std::string& name) { return fixtures_->at(name); }
  static std::map<std::string, json>* fixtures_;
};
std::map<std::string, json>* RecordedTest::fixtures_ = nullptr;

std::vector<std::string> encoded_message(const json& chunks) {
  MessagesStream s("m", "msg_s");
  return testing::encode(s, chunks);
}

ClientJson streamed_message(const json& chunks) {
  return testing::accumulate_anthropic(testing::parse_events(encoded_message(chunks)));
}

ResponsesConversion conversion_for(const json& fixture) {
  auto c = responses_to_chat(ClientJson(fixture["engine_responses"]["request"]), json::array());
  EXPECT_TRUE(c.ok());
  return c.ok() ? std::move(c).value() : ResponsesConversion{};
}

ClientJson streamed_response(const json& chunks, const ResponsesConversion& c) {
  ResponsesStream s(c, "resp_s", 1);
  return testing::accumulate_responses(testing::parse_events(testing::encode(s, chunks)));
}

TEST_F(RecordedTest, StreamedMessagesAccumulateToTheNonStreamedOnes) {
  for (const auto& [name, f] : *fixtures_) {
    SCOPED_TRACE(name);
    ASSERT_EQ(f["status"], 200);
    const ClientJson whole = chat_to_message(f["response"], "m");
    const ClientJson streamed = streamed_message(f["chunks"]);
    EXPECT_EQ(streamed["stop_reason"], whole["stop_reason"]);
    EXPECT_EQ(streamed["stop_sequence"], whole["stop_sequence"]);
    if (whole["stop_reason"] == "max_tokens" && name == "tool_call_cut") {
      // Cut inside the arguments: the stream carried the text written so far, the whole
      // reply has input {} (its arguments are not an object).
      EXPECT_EQ(whole["content"][1]["input"], ClientJson::object());
      EXPECT_TRUE(streamed["content"][1]["input"].is_string());
      EXPECT_EQ(streamed["content"][1]["input"].get<std::string>(),
                f["response"]["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>());
    } else {
      EXPECT_EQ(without_call_ids(streamed["content"]), without_call_ids(whole["content"]));
    }
    // The second request read its prompt from the cache; the sums and outputs agree.
    const ClientJson& su = streamed["usage"];
    const ClientJson& wu = whole["usage"];
    EXPECT_EQ(su["output_tokens"], wu["output_tokens"]);
    EXPECT_EQ(su["input_tokens"].get<int64_t>() + su["cache_read_input_tokens"].get<int64_t>(),
              wu["input_tokens"].get<int64_t>() + wu["cache_read_input_tokens"].get<int64_t>());
    EXPECT_GT(su["cache_read_input_tokens"].get<int64_t>(), 0);
  }
}

TEST_F(RecordedTest, WhatEachScenarioBecomesInAnthropicsFormat) {
  auto message = [](const std::string& name) { return chat_to_message(fixture(name)["response"], "m"); };
  auto types = [](const ClientJson& m) {
    std::string out;
    for (const ClientJson& b : m["content"]) out += b["type"].get<std::string>() + " ";
    return out;
  };
  EXPECT_EQ(types(message("text_length")), "text ");
  EXPECT_EQ(message("text_length")["stop_reason"], "max_tokens");
  EXPECT_EQ(message("text_end_of_turn")["stop_reason"], "end_turn");
  const ClientJson stopped = message("text_stop_word");
  EXPECT_EQ(stopped["stop_reason"], "stop_sequence");
  EXPECT_EQ(stopped["stop_sequence"], " with");
  const ClientJson reasoning = message("reasoning_then_text");
  EXPECT_EQ(types(reasoning), "thinking text ");
  EXPECT_EQ(reasoning["content"][0]["thinking"].get<std::string>(),
            fixture("reasoning_then_text")["response"]["choices"][0]["message"]["reasoning_content"].get<std::string>());
  const ClientJson calls = message("tool_calls");
  EXPECT_EQ(types(calls), "text tool_use tool_use ");
  EXPECT_EQ(calls["stop_reason"], "tool_use");
  EXPECT_EQ(calls["content"][1]["input"], ClientJson::parse(R"({"city": "Paris", "unit": "celsius"})"));
  EXPECT_EQ(calls["content"][2]["input"].dump(),
            R"({"path":"notes.txt","limit":20})");  // the model's key order
  const ClientJson cut = message("tool_call_cut");
  EXPECT_EQ(cut["stop_reason"], "max_tokens");
  EXPECT_EQ(types(cut), "text tool_use ");
  // usage: input_tokens counts what was not read from the cache.
  const json& usage = fixture("tool_calls")["response"]["usage"];
  EXPECT_EQ(
      calls["usage"]["input_tokens"],
      usage["prompt_tokens"].get<int64_t>() - usage["prompt_tokens_details"]["cached_tokens"].get<int64_t>());
  EXPECT_EQ(calls["usage"]["cache_read_input_tokens"].get<int64_t>(),
            usage["prompt_tokens_details"]["cached_tokens"].get<int64_t>());
}

TEST_F(RecordedTest, StreamedResponsesAccumulateToTheNonStreamedOnes) {
  for (const auto& [name, f] : *fixtures_) {
    SCOPED_TRACE(name);
    const ResponsesConversion c = conversion_for(f);
    ClientJson whole = chat_to_response(f["response"], c, "resp_s", 1);
    ClientJson streamed = streamed_response(f["chunks"], c);
    EXPECT_EQ(without_call_ids(streamed["output"]), without_call_ids(whole["output"]));
    EXPECT_EQ(streamed["status"], whole["status"]);
    EXPECT_EQ(streamed["usage"]["input_tokens"], whole["usage"]["input_tokens"]);
    EXPECT_EQ(streamed["usage"]["output_tokens"], whole["usage"]["output_tokens"]);
  }
}

// The engine's own /v1/responses took the same request (and the same steering) and wrote the
// same reply: our conversion of its chat answer must hold the same items and texts.
TEST_F(RecordedTest, ResponsesOutputMatchesTheEnginesOwnResponsesAnswer) {
  for (const auto& [name, f] : *fixtures_) {
    SCOPED_TRACE(name);
    const ClientJson native(f["engine_responses"]["response"]);  // compared as the client reads it
    ASSERT_EQ(f["engine_responses"]["status"], 200) << native.dump();
    const ClientJson ours = chat_to_response(f["response"], conversion_for(f), "resp_s", 1);
    ASSERT_EQ(ours["output"].size(), native["output"].size()) << native["output"].dump();
    for (size_t i = 0; i < native["output"].size(); ++i) {
      const ClientJson& theirs = native["output"][i];
      const ClientJson& mine = ours["output"][i];
      EXPECT_EQ(mine["type"], theirs["type"]);
      if (theirs["type"] == "function_call") {
        EXPECT_EQ(mine["name"], theirs["name"]);
        EXPECT_EQ(mine["arguments"], theirs["arguments"]);
      } else {
        EXPECT_EQ(mine["content"][0]["text"], theirs["content"][0]["text"]);
        EXPECT_EQ(mine["content"][0]["type"], theirs["content"][0]["type"]);
      }
    }
    EXPECT_EQ(ours["usage"]["input_tokens"], native["usage"]["input_tokens"]);
    EXPECT_EQ(ours["usage"]["output_tokens"], native["usage"]["output_tokens"]);
  }
}

// The engine's Anthropic answers are unsteered (its conversion drops logit_bias), so only
// their shape is compared: the fields of the message and of its usage, and the event names.
TEST_F(RecordedTest, AnthropicShapesCoverTheEnginesOwn) {
  for (const auto& [name, f] : *fixtures_) {
    SCOPED_TRACE(name);
    const json& native = f["engine_anthropic"];
    if (native["status"] != 200) continue;  // random text the engine could not parse
    const ClientJson ours = chat_to_message(f["response"], "m");
    for (const auto& [key, value] : native["response"].items()) EXPECT_TRUE(ours.contains(key)) << key;
    for (const auto& [key, value] : native["response"]["usage"].items())
      EXPECT_TRUE(ours["usage"].contains(key)) << key;
    std::set<std::string> their_events;
    for (const json& e : native["events"]) their_events.insert(e["event"].get<std::string>());
    std::set<std::string> our_events;
    for (const std::string& event :
         testing::event_names(testing::parse_events(encoded_message(f["chunks"])))) {
      our_events.insert(event);
    }
    EXPECT_EQ(our_events, their_events);
  }
}

TEST_F(RecordedTest, RepliesRoundTripAsHistory) {
  for (const auto& [name, f] : *fixtures_) {
    SCOPED_TRACE(name);
    json original = f["response"]["choices"][0]["message"];
    original.erase("reasoning_content");
    if (original["content"] == "" && original.contains("tool_calls")) original["content"] = nullptr;
    // Anthropic: the message goes back as the assistant turn of the next request.
    const ClientJson message = chat_to_message(f["response"], "m");
    auto a = messages_to_chat(ClientJson{
        {"max_tokens", 5},
        {"messages",
         {{{"role", "user"}, {"content", "q"}}, {{"role", "assistant"}, {"content", message["content"]}}}}});
    ASSERT_TRUE(a.ok());
    json back = a->chat["messages"][1];
    if (name == "tool_call_cut") {
      EXPECT_EQ(back["tool_calls"][0]["function"]["arguments"],
                "{}");  // the cut arguments were not an object
    } else if (original.contains("tool_calls")) {
      // The arguments come back as the same object (compact JSON; the gateway's stored
      // message stands in for the equivalent one, see docs).
      for (size_t i = 0; i < original["tool_calls"].size(); ++i) {
        json& call = back["tool_calls"][i];
        EXPECT_EQ(ClientJson::parse(call["function"]["arguments"].get<std::string>()),
                  ClientJson::parse(original["tool_calls"][i]["function"]["arguments"].get<std::string>()));
        call["function"]["arguments"] = original["tool_calls"][i]["function"]["arguments"];
      }
      EXPECT_EQ(back, original);
    } else {
      EXPECT_EQ(back, original);
    }
    // Responses: the output goes back as the conversation's stored messages, exactly.
    const ClientJson response = chat_to_response(f["response"], conversion_for(f), "resp_s", 1);
    EXPECT_EQ(output_to_chat_messages(response), json::array({original}));
  }
}

}  // namespace
}  // namespace kvgate::wire
