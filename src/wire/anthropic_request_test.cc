#include "wire/anthropic_request.h"

#include <gtest/gtest.h>

#include "testing/wire_support.h"

namespace kvgate::wire {
namespace {

using nlohmann::json;

ChatConversion convert_ok(const std::string& request) {
  auto r = messages_to_chat(ClientJson::parse(request));
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? std::move(r).value() : ChatConversion{};
}

WireError convert_error(const std::string& request) {
  auto r = messages_to_chat(ClientJson::parse(request));
  EXPECT_FALSE(r.ok());
  return r.ok() ? WireError{} : std::move(r).error();
}

bool contains(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

TEST(AnthropicRequestTest, SystemBlocksAreJoinedAndCacheControlIgnored) {
  auto c = convert_ok(R"({"model": "claude-x", "max_tokens": 64,
    "system": [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}},
               {"type": "text", "text": "Answer in English."}],
    "messages": [{"role": "user", "content": "Hi"}]})");
  EXPECT_EQ(c.chat["messages"], json::parse(R"([
    {"role": "system", "content": "You are terse.\n\nAnswer in English."},
    {"role": "user", "content": "Hi"}])"));
  EXPECT_EQ(c.chat["max_tokens"], 64);
  EXPECT_EQ(c.chat["model"], "claude-x");
  EXPECT_EQ(c.model, "claude-x");
  EXPECT_FALSE(c.stream);
  EXPECT_FALSE(c.chat.contains("stream"));
  EXPECT_FALSE(c.has_images);
  EXPECT_TRUE(c.ignored.empty());
}

TEST(AnthropicRequestTest, TheBillingStampOfClaudeCodeIsMasked) {
  auto stamped = [](const char* cch) {
    return convert_ok(std::string(R"({"max_tokens": 8, "system": [{"type": "text",
      "text": "x-anthropic-billing-header: cc_version=2.1.101.e51; cc_entrypoint=cli; cch=)") +
                      cch + R"(;"},
      {"type": "text", "text": "You are Claude Code."}], "messages": [{"role": "user", "content": "q"}]})")
        .chat["messages"][0]["content"]
        .get<std::string>();
  };
  EXPECT_EQ(stamped("a5145"), stamped("0be91"));
  EXPECT_EQ(stamped("a5145"),
            "x-anthropic-billing-header: cc_version=2.1.101.e51; cc_entrypoint=cli; cch=00000;\n\nYou are "
            "Claude Code.");
  // Only that header line is touched.
  EXPECT_EQ(convert_ok(R"({"max_tokens": 8, "system": "Note: cch=a5145; stays",
    "messages": [{"role": "user", "content": "q"}]})")
                .chat["messages"][0]["content"],
            "Note: cch=a5145; stays");
}

TEST(AnthropicRequestTest, SystemStringAndSystemRoleMessages) {
  auto c = convert_ok(R"({"max_tokens": 8, "system": "S",
    "messages": [{"role": "system", "content": [{"type": "text", "text": "more"}]},
                 {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]})");
  EXPECT_EQ(c.chat["messages"], json::parse(R"([
    {"role": "system", "content": "S"}, {"role": "system", "content": "more"},
    {"role": "user", "content": "a\n\nb"}])"));
}

TEST(AnthropicRequestTest, ImagesBecomeImageUrlParts) {
  auto c = convert_ok(R"({"max_tokens": 8, "messages": [{"role": "user", "content": [
    {"type": "text", "text": "What is this?"},
    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0K"}},
    {"type": "image", "source": {"type": "url", "url": "https://example.com/a.jpg"}}]}]})");
  EXPECT_TRUE(c.has_images);
  EXPECT_EQ(c.chat["messages"][0]["content"], json::parse(R"([
    {"type": "text", "text": "What is this?"},
    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0K"}},
    {"type": "image_url", "image_url": {"url": "https://example.com/a.jpg"}}])"));
  auto e = convert_error(R"({"max_tokens": 8, "messages": [{"role": "user", "content": [
    {"type": "image", "source": {"type": "file", "file_id": "f1"}}]}]})");
  EXPECT_EQ(e.param, "messages.0.content.0.source.type");
}

TEST(AnthropicRequestTest, ToolUseKeepsIdAndKeyOrderOfInput) {
  auto c = convert_ok(R"({"max_tokens": 8, "messages": [
    {"role": "user", "content": "Write it"},
    {"role": "assistant", "content": [
      {"type": "thinking", "thinking": "hmm", "signature": "sig"},
      {"type": "text", "text": "Writing."},
      {"type": "tool_use", "id": "toolu_1", "name": "write_file", "input": {"path": "a.txt", "content": "x"}},
      {"type": "tool_use", "id": "toolu_2", "name": "list", "input": {}}]}]})");
  const json& m = c.chat["messages"][1];
  EXPECT_EQ(m["role"], "assistant");
  EXPECT_EQ(m["content"], "Writing.");
  ASSERT_EQ(m["tool_calls"].size(), 2u);
  EXPECT_EQ(m["tool_calls"][0], json::parse(R"({"id": "toolu_1", "type": "function",
    "function": {"name": "write_file", "arguments": "{\"path\":\"a.txt\",\"content\":\"x\"}"}})"));
  EXPECT_EQ(m["tool_calls"][1]["function"]["arguments"], "{}");
  EXPECT_FALSE(m.contains("reasoning_content"));
}

TEST(AnthropicRequestTest, ToolOnlyAssistantTurnHasNullContent) {
  auto c = convert_ok(R"({"max_tokens": 8, "messages": [{"role": "assistant", "content": [
    {"type": "tool_use", "id": "t", "name": "f", "input": {"a": 1}}]}]})");
  EXPECT_TRUE(c.chat["messages"][0]["content"].is_null());
}

TEST(AnthropicRequestTest, ToolResultsBecomeToolMessagesBeforeTheRestOfTheTurn) {
  auto c = convert_ok(R"({"max_tokens": 8, "messages": [{"role": "user", "content": [
    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"},
    {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": true,
     "content": [{"type": "text", "text": "no such file"}, {"type": "text", "text": "a.txt"}]},
    {"type": "tool_result", "tool_use_id": "toolu_3"},
    {"type": "text", "text": "Go on."}]}]})");
  EXPECT_EQ(c.chat["messages"], json::parse(R"([
    {"role": "tool", "tool_call_id": "toolu_1", "content": "ok"},
    {"role": "tool", "tool_call_id": "toolu_2", "content": "Error: no such file\n\na.txt"},
    {"role": "tool", "tool_call_id": "toolu_3", "content": ""},
    {"role": "user", "content": "Go on."}])"));
}

TEST(AnthropicRequestTest, ImageInAToolResultMovesToTheUserMessageAfterIt) {
  auto c = convert_ok(R"({"max_tokens": 8, "messages": [{"role": "user", "content": [
    {"type": "tool_result", "tool_use_id": "t1", "content": [
      {"type": "text", "text": "screenshot"},
      {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "AAA"}}]}]}]})");
  EXPECT_TRUE(c.has_images);
  EXPECT_EQ(c.chat["messages"], json::parse(R"([
    {"role": "tool", "tool_call_id": "t1", "content": "screenshot"},
    {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,AAA"}}]}])"));
}

TEST(AnthropicRequestTest, DocumentsWithTextSourceAreText) {
  auto c = convert_ok(R"({"max_tokens": 8, "messages": [{"role": "user", "content": [
    {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "the doc"}},
    {"type": "text", "text": "Summarise."}]}]})");
  EXPECT_EQ(c.chat["messages"][0]["content"], "the doc\n\nSummarise.");
  auto e = convert_error(
      R"({"max_tokens": 8, "messages": [{"role": "user", "content": [{"type": "text", "text": "x"},
    {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBE"}}]}]})");
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.type, "invalid_request_error");
  EXPECT_EQ(e.param, "messages.0.content.1.source.type");
}

TEST(AnthropicRequestTest, UnknownBlocksAndFieldsAreListedNotFatal) {
  auto c =
      convert_ok(R"({"max_tokens": 8, "context_management": {"edits": []}, "output_config": {"effort": "low"},
    "service_tier": "auto", "cache_control": {"type": "ephemeral"},
    "messages": [{"role": "user", "content": [{"type": "search_result", "source": "s", "title": "t", "content": []},
                                              {"type": "text", "text": "q"}]}]})");
  EXPECT_FALSE(contains(c.ignored, "context_management"));  // served (context_edits.h)
  EXPECT_TRUE(c.edits.requested);
  EXPECT_TRUE(contains(c.ignored, "output_config"));
  EXPECT_TRUE(contains(c.ignored, "service_tier"));
  EXPECT_TRUE(contains(c.ignored, "cache_control"));
  EXPECT_TRUE(contains(c.ignored, "messages.0.content.0.type=search_result"));
  EXPECT_EQ(c.chat["messages"][0]["content"], "q");
}

TEST(AnthropicRequestTest, CustomToolsBecomeFunctionsServerToolsAreDropped) {
  auto c = convert_ok(R"({"max_tokens": 8, "messages": [{"role": "user", "content": "q"}], "tools": [
    {"name": "read", "description": "Read a file", "input_schema": {"type": "object", "properties": {"p": {"type": "string"}}}},
    {"type": "custom", "name": "list", "input_schema": {"type": "object"}},
    {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}]})");
  EXPECT_EQ(c.chat["tools"], json::parse(R"([
    {"type": "function", "function": {"name": "read", "description": "Read a file",
      "parameters": {"type": "object", "properties": {"p": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "list", "parameters": {"type": "object"}}}])"));
  EXPECT_TRUE(contains(c.ignored, "tools.2=web_search_20250305"));
  auto e = convert_error(R"({"max_tokens": 8, "messages": [{"role": "user", "content": "q"}],
    "tools": [{"name": "read"}]})");
  EXPECT_EQ(e.param, "tools.0.input_schema");
}

TEST(AnthropicRequestTest, ToolChoiceMapsToChatForms) {
  const std::string base = R"({"max_tokens": 8, "messages": [{"role": "user", "content": "q"}],
    "tools": [{"name": "read", "input_schema": {"type": "object"}}], "tool_choice": )";
  EXPECT_EQ(convert_ok(base + R"({"type": "auto"}})").chat["tool_choice"], "auto");
  EXPECT_EQ(convert_ok(base + R"({"type": "any"}})").chat["tool_choice"], "required");
  EXPECT_EQ(convert_ok(base + R"({"type": "none"}})").chat["tool_choice"], "none");
  auto named = convert_ok(base + R"({"type": "tool", "name": "read", "disable_parallel_tool_use": true}})");
  EXPECT_EQ(named.chat["tool_choice"], json::parse(R"({"type": "function", "function": {"name": "read"}})"));
  EXPECT_EQ(named.chat["parallel_tool_calls"], false);
  EXPECT_FALSE(convert_ok(base + R"({"type": "auto"}})").chat.contains("parallel_tool_calls"));
  EXPECT_EQ(convert_error(base + R"({"type": "tool", "name": "write"}})").param, "tool_choice.name");
  EXPECT_EQ(convert_error(base + R"({"type": "sometimes"}})").param, "tool_choice.type");
  auto no_tools = convert_ok(R"({"max_tokens": 8, "messages": [{"role": "user", "content": "q"}],
    "tool_choice": {"type": "any"}})");
  EXPECT_FALSE(no_tools.chat.contains("tool_choice"));
  EXPECT_TRUE(contains(no_tools.ignored, "tool_choice"));
}

TEST(AnthropicRequestTest, SamplingFields) {
  auto c = convert_ok(R"({"max_tokens": 100, "stop_sequences": ["END", "###"], "temperature": 0.2,
    "top_p": 0.9, "top_k": 20, "messages": [{"role": "user", "content": "q"}]})");
  EXPECT_EQ(c.chat["stop"], json::parse(R"(["END", "###"])"));
  EXPECT_EQ(c.chat["verbose"], true);
  EXPECT_DOUBLE_EQ(c.chat["temperature"].get<double>(), 0.2);
  EXPECT_DOUBLE_EQ(c.chat["top_p"].get<double>(), 0.9);
  EXPECT_EQ(c.chat["top_k"], 20);
  EXPECT_FALSE(convert_ok(R"({"max_tokens": 1, "messages": [{"role": "user", "content": "q"}]})")
                   .chat.contains("verbose"));
  EXPECT_EQ(convert_error(R"({"messages": [{"role": "user", "content": "q"}]})").param, "max_tokens");
  EXPECT_EQ(convert_error(R"({"max_tokens": 0, "messages": [{"role": "user", "content": "q"}]})").param,
            "max_tokens");
  EXPECT_EQ(convert_error(R"({"max_tokens": 1.5, "messages": [{"role": "user", "content": "q"}]})").param,
            "max_tokens");
  EXPECT_EQ(convert_error(
                R"({"max_tokens": 5, "temperature": "hot", "messages": [{"role": "user", "content": "q"}]})")
                .param,
            "temperature");
  EXPECT_EQ(
      convert_error(
          R"({"max_tokens": 5, "stop_sequences": ["a", 1], "messages": [{"role": "user", "content": "q"}]})")
          .param,
      "stop_sequences.1");
}

TEST(AnthropicRequestTest, ThinkingSetsTheGatewayThinkingField) {
  const std::string base = R"({"max_tokens": 2048, "messages": [{"role": "user", "content": "q"}])";
  const auto enabled = convert_ok(base + R"(, "thinking": {"type": "enabled", "budget_tokens": 1024}})");
  EXPECT_EQ(enabled.chat["kvgate"], json::parse(R"({"thinking": true})"));
  EXPECT_EQ(enabled.chat["thinking_budget_tokens"], 1024);
  EXPECT_EQ(convert_ok(base + R"(, "thinking": {"type": "adaptive"}})").chat["kvgate"],
            json::parse(R"({"thinking": true})"));
  EXPECT_EQ(convert_ok(base + R"(, "thinking": {"type": "disabled"}})").chat["kvgate"],
            json::parse(R"({"thinking": false})"));
  EXPECT_FALSE(convert_ok(base + "}").chat.contains("kvgate"));
}

TEST(AnthropicRequestTest, StreamAsksForUsageAndUserIdIsTheSessionKey) {
  auto c = convert_ok(R"({"max_tokens": 8, "stream": true, "metadata": {"user_id": "user_abc_session_42"},
    "messages": [{"role": "user", "content": "q"}]})");
  EXPECT_TRUE(c.stream);
  EXPECT_EQ(c.chat["stream"], true);
  EXPECT_EQ(c.chat["stream_options"], json::parse(R"({"include_usage": true})"));
  ASSERT_TRUE(c.session_key.has_value());
  EXPECT_EQ(*c.session_key, "user_abc_session_42");
  EXPECT_FALSE(
      convert_ok(R"({"max_tokens": 8, "messages": [{"role": "user", "content": "q"}]})").session_key);
}

TEST(AnthropicRequestTest, ErrorsNameTheFieldPath) {
  struct Case {
    const char* request;
    const char* param;
  };
  const Case cases[] = {
      {R"([])", ""},
      {R"({"max_tokens": 8})", "messages"},
      {R"({"max_tokens": 8, "messages": []})", "messages"},
      {R"({"max_tokens": 8, "messages": [{"role": "user", "content": "a"}, "b"]})", "messages.1"},
      {R"({"max_tokens": 8, "messages": [{"role": "wizard", "content": "a"}]})", "messages.0.role"},
      {R"({"max_tokens": 8, "messages": [{"role": "user"}]})", "messages.0.content"},
      {R"({"max_tokens": 8, "messages": [{"role": "user", "content": 3}]})", "messages.0.content"},
      {R"({"max_tokens": 8, "messages": [{"role": "user", "content": "a"}, {"role": "user", "content": [
         {"type": "text", "text": "x"}, {"type": "tool_result", "content": "r"}]}]})",
       "messages.1.content.1.tool_use_id"},
      {R"({"max_tokens": 8, "messages": [{"role": "user", "content": [{"type": "tool_use", "id": "a", "name": "b",
         "input": {}}]}]})",
       "messages.0.content.0.type"},
      {R"({"max_tokens": 8, "messages": [{"role": "assistant", "content": [{"type": "tool_result",
         "tool_use_id": "a"}]}]})",
       "messages.0.content.0.type"},
      {R"({"max_tokens": 8, "messages": [{"role": "assistant", "content": [{"type": "tool_use", "name": "b"}]}]})",
       "messages.0.content.0.id"},
      {R"({"max_tokens": 8, "system": 5, "messages": [{"role": "user", "content": "a"}]})", "system"},
      {R"({"max_tokens": 8, "system": [{"type": "image"}], "messages": [{"role": "user", "content": "a"}]})",
       "system.0.type"},
      {R"({"max_tokens": 8, "model": 7, "messages": [{"role": "user", "content": "a"}]})", "model"},
      {R"({"max_tokens": 8, "thinking": {"budget_tokens": 5}, "messages": [{"role": "user", "content": "a"}]})",
       "thinking.type"},
  };
  for (const Case& c : cases) {
    auto e = convert_error(c.request);
    EXPECT_EQ(e.param, c.param) << c.request;
    EXPECT_EQ(e.status, 400) << c.request;
    EXPECT_EQ(e.type, "invalid_request_error") << c.request;
    if (*c.param != '\0') {
      EXPECT_EQ(e.message.rfind(std::string(c.param) + ": ", 0), 0u) << e.message;
    }
  }
}

TEST(AnthropicRequestTest, CountTokensNeedsNoMaxTokensAndCarriesNoSampling) {
  auto r = count_tokens_to_chat(ClientJson::parse(R"({"model": "m", "system": "S", "max_tokens": 5,
    "temperature": 1, "messages": [{"role": "user", "content": "q"}],
    "tools": [{"name": "read", "input_schema": {"type": "object"}}]})"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->chat.size(), 3u) << r->chat.dump();  // model, messages, tools
  EXPECT_EQ(r->chat["messages"].size(), 2u);
  EXPECT_EQ(r->chat["tools"].size(), 1u);
  EXPECT_FALSE(r->chat.contains("max_tokens"));
  auto bare = count_tokens_to_chat(ClientJson::parse(R"({"messages": [{"role": "user", "content": "q"}]})"));
  EXPECT_TRUE(bare.ok());
  EXPECT_EQ(count_tokens_answer(42), ClientJson::parse(R"({"input_tokens": 42})"));
}

// A tool's schema reaches the engine with its keys in the order the client wrote them
// (opencode's edit tool: oldString before newString); the chat body's own value is the same
// JSON with sorted keys, so both say the same.
TEST(AnthropicRequestTest, ToolSchemasKeepTheClientsKeyOrder) {
  auto c = messages_to_chat(ClientJson::parse(R"({"model": "m", "max_tokens": 5,
    "messages": [{"role": "user", "content": "q"}],
    "tools": [{"name": "edit", "description": "Edit a file", "input_schema": {"type": "object",
      "properties": {"oldString": {"type": "string"}, "newString": {"type": "string"}},
      "required": ["oldString", "newString"]}}]})"));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->tools_text,
            R"([{"type":"function","function":{"name":"edit","description":"Edit a file","parameters":)"
            R"({"type":"object","properties":{"oldString":{"type":"string"},"newString":{"type":"string"}},)"
            R"("required":["oldString","newString"]}}}])");
  EXPECT_EQ(json::parse(c->tools_text), c->chat["tools"]);
  auto none = messages_to_chat(
      ClientJson::parse(R"({"max_tokens": 5, "messages": [{"role": "user", "content": "q"}]})"));
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->tools_text, "");
}

// Client input never aborts: every type at every field of a valid request converts or gives
// a 400.
TEST(AnthropicRequestTest, AnyValueAnywhereIsAnAnswerNotACrash) {
  const ClientJson valid =
      ClientJson::parse(R"({"model": "m", "max_tokens": 8, "system": [{"type": "text", "text": "s"}],
    "stream": true, "metadata": {"user_id": "u"}, "thinking": {"type": "enabled"}, "stop_sequences": ["x"],
    "tools": [{"name": "f", "input_schema": {"type": "object"}}], "tool_choice": {"type": "tool", "name": "f"},
    "messages": [{"role": "user", "content": [{"type": "text", "text": "a"},
      {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "A"}}]},
      {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {"k": 1}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "is_error": true,
        "content": [{"type": "text", "text": "r"}]}]}]})");
  const size_t tried = testing::for_each_mutation(valid, [](const ClientJson& f) {
    auto r = messages_to_chat(f);
    if (!r.ok()) {
      EXPECT_EQ(r.error().status, 400);
    }
  });
  EXPECT_GT(tried, 100u);
}

}  // namespace
TEST(AnthropicRequestTest, ContextManagementEditsAreRead) {
  auto c = convert_ok(R"({"max_tokens": 8, "messages": [{"role": "user", "content": "q"}],
    "context_management": {"edits": [
      {"type": "clear_tool_uses_20250919", "trigger": {"type": "tool_uses", "value": 6},
       "keep": {"type": "tool_uses", "value": 2}, "clear_at_least": {"type": "input_tokens", "value": 500},
       "exclude_tools": ["memory"], "clear_tool_inputs": ["edit"]},
      {"type": "clear_thinking_20251015", "keep": "all"},
      {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 60000},
       "instructions": "Keep file names.", "pause_after_compaction": true}]}})");
  ASSERT_TRUE(c.edits.clear_tool_uses.has_value());
  EXPECT_EQ(c.edits.clear_tool_uses->trigger_tool_uses, 6u);
  EXPECT_EQ(c.edits.clear_tool_uses->keep, 2u);
  EXPECT_EQ(c.edits.clear_tool_uses->clear_at_least, 500u);
  EXPECT_EQ(c.edits.clear_tool_uses->exclude_tools, std::vector<std::string>{"memory"});
  EXPECT_TRUE(c.edits.clear_tool_uses->clear_inputs);
  ASSERT_TRUE(c.edits.compact.has_value());
  EXPECT_EQ(c.edits.compact->trigger_tokens, 60000u);
  EXPECT_EQ(c.edits.compact->instructions, "Keep file names.");
  EXPECT_TRUE(c.edits.compact->pause);

  auto defaults = convert_ok(R"({"max_tokens": 8, "messages": [{"role": "user", "content": "q"}],
    "context_management": {"edits": [{"type": "clear_tool_uses_20250919"}, {"type": "compact_20260112"}]}})");
  EXPECT_EQ(defaults.edits.clear_tool_uses->trigger_tokens, 100000u);
  EXPECT_EQ(defaults.edits.clear_tool_uses->keep, 3u);
  EXPECT_EQ(defaults.edits.compact->trigger_tokens, 150000u);
  EXPECT_FALSE(defaults.edits.compact->pause);
}

TEST(AnthropicRequestTest, ContextManagementErrorsNameTheField) {
  const std::string start = R"({"max_tokens": 8, "messages": [{"role": "user", "content": "q"}], )";
  EXPECT_EQ(convert_error(start + R"("context_management": {"edits": [{"type": "forget_all"}]}})").param,
            "context_management.edits.0.type");
  EXPECT_EQ(convert_error(start + R"("context_management": {"edits": [{"type": "compact_20260112",
      "trigger": {"type": "tool_uses", "value": 3}}]}})")
                .param,
            "context_management.edits.0.trigger.type");
  EXPECT_EQ(convert_error(start + R"("context_management": {"edits": [{"type": "clear_tool_uses_20250919",
      "keep": {"type": "tool_uses", "value": -1}}]}})")
                .param,
            "context_management.edits.0.keep.value");
  EXPECT_EQ(convert_error(start + R"("context_management": {"edits": [{"type": "compact_20260112"},
      {"type": "compact_20260112"}]}})")
                .param,
            "context_management.edits.1.type");
  EXPECT_EQ(convert_error(start + R"("context_management": []})").param, "context_management");
}

TEST(AnthropicRequestTest, ACompactionBlockReplacesWhatCameBeforeIt) {
  auto c = convert_ok(R"({"max_tokens": 8, "system": "sys", "messages": [
    {"role": "user", "content": "old question"},
    {"role": "assistant", "content": [{"type": "text", "text": "old answer"},
                                      {"type": "compaction", "content": "the summary", "encrypted_content": null},
                                      {"type": "text", "text": "new answer"}]},
    {"role": "user", "content": "next"}]})");
  ASSERT_TRUE(c.carried_summary.has_value());
  EXPECT_EQ(*c.carried_summary, "the summary");
  const auto& m = c.chat["messages"];
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[0]["content"], "sys");
  EXPECT_EQ(m[1]["role"], "assistant");
  EXPECT_EQ(m[1]["content"], "new answer");
  EXPECT_EQ(m[2]["content"], "next");
  EXPECT_EQ(c.chat.dump().find("old"), std::string::npos);

  // A compaction block alone leaves no assistant message; a failed one (null) changes nothing.
  auto alone = convert_ok(R"({"max_tokens": 8, "messages": [{"role": "user", "content": "q"},
    {"role": "assistant", "content": [{"type": "compaction", "content": "s"}]}, {"role": "user", "content": "go on"}]})");
  ASSERT_EQ(alone.chat["messages"].size(), 1u);
  EXPECT_EQ(alone.chat["messages"][0]["content"], "go on");
  auto failed = convert_ok(R"({"max_tokens": 8, "messages": [{"role": "user", "content": "q"},
    {"role": "assistant", "content": [{"type": "compaction", "content": null}, {"type": "text", "text": "a"}]},
    {"role": "user", "content": "go on"}]})");
  EXPECT_FALSE(failed.carried_summary.has_value());
  EXPECT_EQ(failed.chat["messages"].size(), 3u);
  EXPECT_EQ(convert_error(R"({"max_tokens": 8, "messages": [{"role": "user", "content": "q"},
    {"role": "assistant", "content": [{"type": "compaction", "content": 7}]}]})")
                .param,
            "messages.1.content.0.content");
}

}  // namespace kvgate::wire
