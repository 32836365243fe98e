#include "wire/responses_request.h"

#include <gtest/gtest.h>

#include "testing/wire_support.h"

namespace kvgate::wire {
namespace {

using nlohmann::json;

ResponsesConversion convert_ok(const std::string& request, const json& previous = json::array()) {
  auto r = responses_to_chat(ClientJson::parse(request), previous);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? std::move(r).value() : ResponsesConversion{};
}

WireError convert_error(const std::string& request) {
  auto r = responses_to_chat(ClientJson::parse(request), json::array());
  EXPECT_FALSE(r.ok());
  return r.ok() ? WireError{} : std::move(r).error();
}

bool contains(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

TEST(ResponsesRequestTest, InstructionsAndStringInput) {
  auto c = convert_ok(R"({"model": "gpt-x", "instructions": "Be brief.", "input": "Hello"})");
  EXPECT_EQ(c.chat["messages"], json::parse(R"([{"role": "system", "content": "Be brief."},
                                                {"role": "user", "content": "Hello"}])"));
  EXPECT_EQ(c.history, json::parse(R"([{"role": "user", "content": "Hello"}])"));
  EXPECT_EQ(c.model, "gpt-x");
  EXPECT_TRUE(c.store);
  EXPECT_FALSE(c.stream);
  EXPECT_FALSE(c.previous_response_id);
  EXPECT_TRUE(c.ignored.empty());
}

TEST(ResponsesRequestTest, PreviousMessagesGoBetweenInstructionsAndInput) {
  const json previous =
      json::parse(R"([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}])");
  auto c = convert_ok(R"({"instructions": "I", "previous_response_id": "resp_1", "input": "c"})", previous);
  EXPECT_EQ(c.chat["messages"], json::parse(R"([{"role": "system", "content": "I"},
    {"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}])"));
  EXPECT_EQ(c.history.size(), 3u);
  ASSERT_TRUE(c.previous_response_id);
  EXPECT_EQ(*c.previous_response_id, "resp_1");
}

TEST(ResponsesRequestTest, MessageItemsWithPartsAndRoles) {
  auto c = convert_ok(R"({"input": [
    {"role": "developer", "content": "dev rules"},
    {"type": "message", "role": "system", "content": [{"type": "input_text", "text": "sys"}]},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "one"},
                                                    {"type": "input_text", "text": "two"}]},
    {"type": "message", "id": "msg_9", "status": "completed", "role": "assistant",
     "content": [{"type": "output_text", "text": "said", "annotations": []}, {"type": "refusal", "refusal": "no"}]},
    {"role": "user", "content": [{"type": "input_text", "text": "look"},
                                 {"type": "input_image", "image_url": "data:image/png;base64,AA", "detail": "auto"}]}]})");
  EXPECT_EQ(c.chat["messages"], json::parse(R"([
    {"role": "system", "content": "dev rules"},
    {"role": "system", "content": "sys"},
    {"role": "user", "content": "one\n\ntwo"},
    {"role": "assistant", "content": "said\n\nno"},
    {"role": "user", "content": [{"type": "text", "text": "look"},
                                 {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}]}])"));
  EXPECT_TRUE(c.has_images);
}

TEST(ResponsesRequestTest, FunctionCallsJoinTheAssistantMessageBeforeThem) {
  auto c = convert_ok(R"({"input": [
    {"role": "user", "content": "do it"},
    {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "xyz"},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "On it."}]},
    {"type": "function_call", "id": "fc_1", "call_id": "call_a", "name": "read", "arguments": "{\"p\":\"x\"}"},
    {"type": "function_call", "call_id": "call_b", "name": "list", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "call_a", "output": "contents"},
    {"type": "function_call_output", "call_id": "call_b", "output": [{"type": "input_text", "text": "a"},
                                                                    {"type": "input_text", "text": "b"}]},
    {"type": "function_call", "call_id": "call_c", "name": "read", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "call_c", "output": "more"}]})");
  EXPECT_EQ(c.chat["messages"], json::parse(R"([
    {"role": "user", "content": "do it"},
    {"role": "assistant", "content": "On it.", "tool_calls": [
      {"id": "call_a", "type": "function", "function": {"name": "read", "arguments": "{\"p\":\"x\"}"}},
      {"id": "call_b", "type": "function", "function": {"name": "list", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "call_a", "content": "contents"},
    {"role": "tool", "tool_call_id": "call_b", "content": "a\n\nb"},
    {"role": "assistant", "content": null, "tool_calls": [
      {"id": "call_c", "type": "function", "function": {"name": "read", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "call_c", "content": "more"}])"));
}

TEST(ResponsesRequestTest, ImagesInFunctionOutputsFollowTheToolMessages) {
  auto c = convert_ok(R"({"input": [
    {"type": "function_call", "call_id": "a", "name": "shot", "arguments": "{}"},
    {"type": "function_call", "call_id": "b", "name": "shot", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "a", "output": [{"type": "input_image", "image_url": "https://x/1.png"}]},
    {"type": "function_call_output", "call_id": "b", "output": "none"}]})");
  EXPECT_EQ(c.chat["messages"], json::parse(R"([
    {"role": "assistant", "content": null, "tool_calls": [
      {"id": "a", "type": "function", "function": {"name": "shot", "arguments": "{}"}},
      {"id": "b", "type": "function", "function": {"name": "shot", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "a", "content": ""},
    {"role": "tool", "tool_call_id": "b", "content": "none"},
    {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x/1.png"}}]}])"));
  EXPECT_TRUE(c.has_images);
}

TEST(ResponsesRequestTest, FunctionToolsMapOthersAreListed) {
  auto c = convert_ok(R"({"input": "q", "tools": [
    {"type": "function", "name": "read", "description": "Read", "strict": true,
     "parameters": {"type": "object", "properties": {"p": {"type": "string"}}, "required": ["p"]}},
    {"type": "function", "name": "now"},
    {"type": "web_search"}, {"type": "custom", "name": "apply_patch"}, {"type": "local_shell"}],
    "tool_choice": "required", "parallel_tool_calls": false})");
  EXPECT_EQ(c.chat["tools"], json::parse(R"([
    {"type": "function", "function": {"name": "read", "description": "Read",
      "parameters": {"type": "object", "properties": {"p": {"type": "string"}}, "required": ["p"]}}},
    {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}}}}])"));
  EXPECT_TRUE(contains(c.ignored, "tools.2=web_search"));
  EXPECT_TRUE(contains(c.ignored, "tools.3=custom"));
  EXPECT_TRUE(contains(c.ignored, "tools.4=local_shell"));
  EXPECT_EQ(c.chat["tool_choice"], "required");
  EXPECT_EQ(c.chat["parallel_tool_calls"], false);
  EXPECT_EQ(c.echo["tools"].size(), 5u);
}

TEST(ResponsesRequestTest, ToolChoiceForms) {
  const std::string base =
      R"({"input": "q", "tools": [{"type": "function", "name": "read"}], "tool_choice": )";
  EXPECT_EQ(convert_ok(base + R"("auto"})").chat["tool_choice"], "auto");
  EXPECT_EQ(convert_ok(base + R"("none"})").chat["tool_choice"], "none");
  EXPECT_EQ(convert_ok(base + R"({"type": "function", "name": "read"}})").chat["tool_choice"],
            json::parse(R"({"type": "function", "function": {"name": "read"}})"));
  auto hosted = convert_ok(base + R"({"type": "web_search_preview"}})");
  EXPECT_FALSE(hosted.chat.contains("tool_choice"));
  EXPECT_TRUE(contains(hosted.ignored, "tool_choice=web_search_preview"));
  EXPECT_EQ(convert_error(base + R"("sometimes"})").param, "tool_choice");
  EXPECT_EQ(convert_error(base + R"({"type": "function", "name": "write"}})").param, "tool_choice.name");
}

TEST(ResponsesRequestTest, SamplingFormatAndReasoning) {
  auto c = convert_ok(R"({"input": "q", "max_output_tokens": 300, "temperature": 0.5, "top_p": 0.8,
    "text": {"format": {"type": "json_schema", "name": "answer", "strict": true,
                        "schema": {"type": "object", "properties": {"a": {"type": "integer"}}}}, "verbosity": "low"},
    "reasoning": {"effort": "high", "summary": "auto"}})");
  EXPECT_EQ(c.chat["max_tokens"], 300);
  EXPECT_DOUBLE_EQ(c.chat["temperature"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(c.chat["top_p"].get<double>(), 0.8);
  EXPECT_EQ(c.chat["response_format"],
            json::parse(R"({"type": "json_schema", "json_schema": {"name": "answer",
    "schema": {"type": "object", "properties": {"a": {"type": "integer"}}}, "strict": true}})"));
  EXPECT_EQ(c.chat["kvgate"], json::parse(R"({"thinking": true})"));
  EXPECT_TRUE(contains(c.ignored, "text.verbosity"));
  EXPECT_TRUE(contains(c.ignored, "reasoning.summary"));
  EXPECT_EQ(
      convert_ok(R"({"input": "q", "text": {"format": {"type": "json_object"}}})").chat["response_format"],
      json::parse(R"({"type": "json_object"})"));
  EXPECT_FALSE(
      convert_ok(R"({"input": "q", "text": {"format": {"type": "text"}}})").chat.contains("response_format"));
  for (const char* effort : {"none", "minimal"}) {
    EXPECT_EQ(convert_ok(std::string(R"({"input": "q", "reasoning": {"effort": ")") + effort + "\"}}")
                  .chat["kvgate"],
              json::parse(R"({"thinking": false})"))
        << effort;
  }
  for (const char* effort : {"low", "medium", "xhigh"}) {
    EXPECT_EQ(convert_ok(std::string(R"({"input": "q", "reasoning": {"effort": ")") + effort + "\"}}")
                  .chat["kvgate"],
              json::parse(R"({"thinking": true})"))
        << effort;
  }
  EXPECT_FALSE(convert_ok(R"({"input": "q", "reasoning": {"effort": null}})").chat.contains("kvgate"));
  EXPECT_FALSE(convert_ok(R"({"input": "q"})").chat.contains("kvgate"));
}

TEST(ResponsesRequestTest, StreamStoreAndSessionKey) {
  auto c = convert_ok(R"({"input": "q", "stream": true, "store": false, "prompt_cache_key": "conv-7",
    "user": "u1", "safety_identifier": "s1", "metadata": {"k": "v"}, "include": ["reasoning.encrypted_content"]})");
  EXPECT_TRUE(c.stream);
  EXPECT_EQ(c.chat["stream"], true);
  EXPECT_EQ(c.chat["stream_options"], json::parse(R"({"include_usage": true})"));
  EXPECT_FALSE(c.store);
  ASSERT_TRUE(c.session_key);
  EXPECT_EQ(*c.session_key, "conv-7");
  EXPECT_TRUE(contains(c.ignored, "user"));
  EXPECT_TRUE(contains(c.ignored, "safety_identifier"));
  EXPECT_TRUE(contains(c.ignored, "include"));
  EXPECT_EQ(c.echo["metadata"], ClientJson::parse(R"({"k": "v"})"));
  EXPECT_EQ(c.echo["store"], false);
  EXPECT_FALSE(convert_ok(R"({"input": "q", "user": "u1"})").session_key);
}

TEST(ResponsesRequestTest, EchoHasTheApiDefaults) {
  auto c = convert_ok(R"({"input": "q"})");
  EXPECT_EQ(c.echo, ClientJson::parse(R"({"instructions": null, "max_output_tokens": null, "metadata": {},
    "parallel_tool_calls": true, "previous_response_id": null, "reasoning": {"effort": null, "summary": null},
    "store": true, "temperature": null, "text": {"format": {"type": "text"}}, "tool_choice": "auto", "tools": [],
    "top_p": null})"));
}

TEST(ResponsesRequestTest, UnsupportedItemsAndFieldsAreNamed) {
  auto c = convert_ok(R"({"input": [{"type": "local_shell_call", "id": "x", "call_id": "c", "action": {}},
                                    {"role": "user", "content": "q"}], "truncation": "auto"})");
  EXPECT_TRUE(contains(c.ignored, "input.0.type=local_shell_call"));
  EXPECT_TRUE(contains(c.ignored, "truncation"));
  EXPECT_EQ(c.chat["messages"].size(), 1u);
  struct Case {
    const char* request;
    const char* param;
  };
  const Case cases[] = {
      {R"("q")", ""},
      {R"({})", "input"},
      {R"({"input": 5})", "input"},
      {R"({"input": [{"type": "item_reference", "id": "msg_1"}]})", "input.0.type"},
      {R"({"input": [{"content": "x"}]})", "input.0.type"},
      {R"({"input": [{"role": "tool", "content": "x"}]})", "input.0.role"},
      {R"({"input": [{"role": "user"}]})", "input.0.content"},
      {R"({"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]})",
       "input.0.content.0.type"},
      {R"({"input": [{"role": "user", "content": [{"type": "input_image", "file_id": "f"}]}]})",
       "input.0.content.0.file_id"},
      {R"({"input": [{"role": "assistant", "content": [{"type": "input_image", "image_url": "u"}]}]})",
       "input.0.content"},
      {R"({"input": [{"type": "function_call", "name": "f"}]})", "input.0.call_id"},
      {R"({"input": [{"type": "function_call_output", "output": "x"}]})", "input.0.call_id"},
      {R"({"input": "q", "conversation": "conv_1"})", "conversation"},
      {R"({"input": "q", "prompt": {"id": "p"}})", "prompt"},
      {R"({"input": "q", "background": true})", "background"},
      {R"({"input": "q", "instructions": ["x"]})", "instructions"},
      {R"({"input": "q", "max_output_tokens": -3})", "max_output_tokens"},
      {R"({"input": "q", "text": {"format": {"type": "json_schema"}}})", "text.format.schema"},
      {R"({"input": "q", "tools": [{"type": "function"}]})", "tools.0.name"},
  };
  for (const Case& k : cases) {
    auto e = convert_error(k.request);
    EXPECT_EQ(e.param, k.param) << k.request;
    EXPECT_EQ(e.status, 400) << k.request;
    EXPECT_EQ(e.type, "invalid_request_error") << k.request;
  }
}

TEST(ResponsesRequestTest, InputTokensAnswer) {
  EXPECT_EQ(input_tokens_answer(17),
            ClientJson::parse(R"({"object": "response.input_tokens", "input_tokens": 17})"));
}

TEST(ResponsesRequestTest, AnyValueAnywhereIsAnAnswerNotACrash) {
  const ClientJson valid =
      ClientJson::parse(R"({"model": "m", "instructions": "i", "stream": true, "store": false,
    "max_output_tokens": 9, "reasoning": {"effort": "low"}, "text": {"format": {"type": "json_schema", "schema": {}}},
    "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}],
    "tool_choice": {"type": "function", "name": "f"}, "prompt_cache_key": "k",
    "input": [{"role": "user", "content": [{"type": "input_text", "text": "a"},
                                          {"type": "input_image", "image_url": "u"}]},
              {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
              {"type": "function_call_output", "call_id": "c", "output": [{"type": "input_text", "text": "r"}]}]})");
  const size_t tried = testing::for_each_mutation(valid, [](const ClientJson& f) {
    auto r = responses_to_chat(f, json::array());
    if (!r.ok()) {
      EXPECT_EQ(r.error().status, 400);
    }
  });
  EXPECT_GT(tried, 100u);
}

TEST(ResponsesRequestTest, ACompactionItemReplacesWhatCameBeforeIt) {
  const std::string item =
      ClientJson{{"type", "compaction"}, {"encrypted_content", compaction_token("the summary")}}.dump();
  const json previous = json::array({{{"role", "user"}, {"content", "earlier"}}});
  auto c = convert_ok(R"({"instructions": "sys", "input": [{"role": "user", "content": "old"}, )" + item +
                          R"(, {"role": "user", "content": "next"}]})",
                      previous);
  ASSERT_TRUE(c.carried_summary.has_value());
  EXPECT_EQ(*c.carried_summary, "the summary");
  EXPECT_EQ(c.previous_count, 0u);  // the previous conversation went with it
  ASSERT_EQ(c.history.size(), 1u);
  EXPECT_EQ(c.history[0]["content"], "next");
  const json& m = c.chat["messages"];
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0]["content"], "sys");
  EXPECT_EQ(m[1]["content"], "next");

  // Another server's compaction cannot be read: a 400 naming the field, not a silent drop.
  auto e = convert_error(R"({"input": [{"type": "compaction", "encrypted_content": "gAAAAB-opaque"}]})");
  EXPECT_EQ(e.param, "input.0.encrypted_content");
  EXPECT_EQ(convert_error(R"({"input": [{"type": "compaction"}]})").param, "input.0.encrypted_content");
}

TEST(ResponsesRequestTest, ContextManagementAsksForACompaction) {
  auto c = convert_ok(
      R"({"input": "q", "context_management": [{"type": "compaction", "compact_threshold": 9000}]})");
  EXPECT_TRUE(c.edits.requested);
  ASSERT_TRUE(c.edits.compact.has_value());
  EXPECT_EQ(c.edits.compact->trigger_tokens, 9000u);
  EXPECT_FALSE(c.edits.compact->pause);
  EXPECT_EQ(convert_error(R"({"input": "q", "context_management": [{"type": "trim"}]})").param,
            "context_management.0.type");
  EXPECT_EQ(convert_error(R"({"input": "q", "context_management": {"type": "compaction"}})").param,
            "context_management");
  EXPECT_EQ(convert_error(
                R"({"input": "q", "context_management": [{"type": "compaction", "compact_threshold": 0}]})")
                .param,
            "context_management.0.compact_threshold");
}

TEST(ResponsesRequestTest, CompactionTokensRoundTrip) {
  EXPECT_EQ(summary_of_compaction_token(compaction_token("a\nb ü")), "a\nb ü");
  EXPECT_FALSE(summary_of_compaction_token("kvgate-summary").has_value());
  EXPECT_FALSE(summary_of_compaction_token("").has_value());
}

}  // namespace
}  // namespace kvgate::wire
