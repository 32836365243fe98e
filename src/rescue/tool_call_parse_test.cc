#include "rescue/tool_call_parse.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>

#include <gtest/gtest.h>

#include "rescue/relaxed_json.h"
#include "testing/cpu_time.h"
#include "testing/paths.h"

namespace kvgate::rescue {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const fs::path kFixtures = fs::path(kvgate::testing::source_dir()) / "tests" / "fixtures" / "tool_calls";

json load(const fs::path& p) {
  std::ifstream in(p);
  return json::parse(in, nullptr, false);
}

const json& fixture_tools() {
  static const json tools = load(kFixtures / "tools.json").value("tools", json::array());
  return tools;
}

std::set<std::string> issue_names(const std::vector<CallNote>& notes) {
  std::set<std::string> out;
  for (const auto& n : notes) out.insert(std::string(call_issue_name(n.issue)));
  return out;
}

// ---- The hand-written outputs of each family (tests/fixtures/tool_calls/<family>.json) ----

struct FixtureCase {
  std::string label;
  json c;
};

void PrintTo(const FixtureCase& c, std::ostream* os) { *os << c.label; }

std::vector<FixtureCase> fixture_cases() {
  std::vector<FixtureCase> out;
  for (const char* family : {"hermes_json", "xml_parameters", "lfm_python", "plain_json"}) {
    json f = load(kFixtures / (std::string(family) + ".json"));
    for (const auto& c : f.value("cases", json::array())) {
      out.push_back({std::string(family) + "_" + c.value("name", "?"), c});
    }
  }
  return out;
}

class FixtureTest : public ::testing::TestWithParam<FixtureCase> {};

TEST_P(FixtureTest, RecoversTheDocumentedCalls) {
  const json& c = GetParam().c;
  const json& want = c.at("expected");
  auto r = parse_tool_calls(c.at("raw").get<std::string>(), fixture_tools());
  const json& msg = r.message;
  EXPECT_EQ(msg.at("role"), "assistant");
  EXPECT_EQ(msg.at("content"), want.at("content")) << msg.dump();
  if (want.contains("reasoning_content")) {
    EXPECT_EQ(msg.value("reasoning_content", json()), want.at("reasoning_content"));
  } else {
    EXPECT_FALSE(msg.contains("reasoning_content")) << msg.dump();
  }
  const json& want_calls = want.at("tool_calls");
  ASSERT_EQ(r.call_count(), want_calls.size()) << msg.dump();
  EXPECT_EQ(msg.contains("tool_calls"), !want_calls.empty());
  for (size_t i = 0; i < want_calls.size(); ++i) {
    const json& call = msg.at("tool_calls").at(i);
    EXPECT_EQ(call.at("id"), "call_" + std::to_string(i));
    EXPECT_EQ(call.at("type"), "function");
    EXPECT_EQ(call.at("function").at("name"), want_calls[i].at("name"));
    ASSERT_TRUE(call.at("function").at("arguments").is_string());
    json args = json::parse(call.at("function").at("arguments").get<std::string>(), nullptr, false);
    EXPECT_EQ(args, want_calls[i].at("arguments")) << "call " << i;
  }
  std::set<std::string> want_notes;
  for (const auto& n : want.at("notes")) want_notes.insert(n.get<std::string>());
  EXPECT_EQ(issue_names(r.notes), want_notes);
}

INSTANTIATE_TEST_SUITE_P(Families, FixtureTest, ::testing::ValuesIn(fixture_cases()),
                         [](const auto& p) { return p.param.label; });

TEST(ToolCallFixtures, EveryFamilyHasCases) {
  EXPECT_GE(fixture_cases().size(), 30u);
  EXPECT_EQ(fixture_tools().size(), 5u);
}

TEST(ToolCallFixtures, OutputsThePinnedEngineRejectedBecomeValidMessages) {
  size_t rejected = 0;
  for (const auto& c : fixture_cases()) {
    bool engine_failed = false;
    const json engine = c.c.value("engine", json::object());
    for (const auto& [tmpl, answer] : engine.items()) {
      engine_failed = engine_failed || answer.value("status", 200) != 200;
    }
    if (!engine_failed) continue;
    ++rejected;
    auto r = parse_tool_calls(c.c.at("raw").get<std::string>(), fixture_tools());
    EXPECT_TRUE(r.call_count() > 0 || !r.message["content"].get<std::string>().empty()) << c.label;
  }
  EXPECT_GE(rejected, 10u);  // recorded by scripts/probe_rescue.py
}

// ---- Behaviour beyond the fixtures ----

const json kWeather = json::parse(R"([{"type": "function", "function": {"name": "get_weather",
  "parameters": {"type": "object", "properties": {"city": {"type": "string"},
  "days": {"type": "integer"}}, "required": ["city"]}}}])");

TEST(ToolCallParse, PlainTextStaysContent) {
  auto r = parse_tool_calls("  Rome is sunny today.\n", kWeather);
  EXPECT_EQ(r.message, json({{"role", "assistant"}, {"content", "Rome is sunny today."}}));
  EXPECT_TRUE(r.notes.empty());
}

TEST(ToolCallParse, EmptyTextGivesEmptyContent) {
  auto r = parse_tool_calls("", kWeather);
  EXPECT_EQ(r.message.at("content"), "");
  EXPECT_EQ(r.call_count(), 0u);
}

TEST(ToolCallParse, NoToolsMeansNoCalls) {
  std::string raw = R"(<tool_call>{"name": "get_weather", "arguments": {"city": "Rome"}}</tool_call>)";
  auto r = parse_tool_calls(raw, json());
  EXPECT_EQ(r.call_count(), 0u);
  EXPECT_EQ(r.message.at("content"), raw);
  EXPECT_TRUE(r.has_issue(CallIssue::kUnknownTool));
}

TEST(ToolCallParse, IdsCountFromFirstIdWithPrefix) {
  std::string raw =
      "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"A\"}}</tool_call>"
      "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"B\"}}</tool_call>";
  ToolCallParseOptions o;
  o.first_id = 7;
  o.id_prefix = "call_s1_";
  auto r = parse_tool_calls(raw, kWeather, o);
  ASSERT_EQ(r.call_count(), 2u);
  EXPECT_EQ(r.message["tool_calls"][0]["id"], "call_s1_7");
  EXPECT_EQ(r.message["tool_calls"][1]["id"], "call_s1_8");
}

TEST(ToolCallParse, CallsBeyondTheLimitStayText) {
  std::string one = "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"A\"}}</tool_call>";
  ToolCallParseOptions o;
  o.max_calls = 2;
  auto r = parse_tool_calls(one + one + one, kWeather, o);
  EXPECT_EQ(r.call_count(), 2u);
  EXPECT_EQ(r.message.at("content"), one);
  EXPECT_TRUE(r.has_issue(CallIssue::kTooManyCalls));
}

TEST(ToolCallParse, TruncatedCallKeptOnlyWhenAccepted) {
  std::string raw = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Ro";
  auto text = parse_tool_calls(raw, kWeather);
  EXPECT_EQ(text.call_count(), 0u);
  EXPECT_EQ(text.message.at("content"), raw);
  ToolCallParseOptions o;
  o.accept_truncated = true;
  auto kept = parse_tool_calls(raw, kWeather, o);
  ASSERT_EQ(kept.call_count(), 1u);
  EXPECT_EQ(kept.message["tool_calls"][0]["function"]["arguments"], R"({"city":"Ro"})");
  EXPECT_TRUE(kept.has_issue(CallIssue::kTruncated));
  EXPECT_TRUE(kept.has_issue(CallIssue::kUnterminated));
}

TEST(ToolCallParse, NormalisedNameIsNotedNotInvented) {
  auto r = parse_tool_calls(
      R"(<tool_call>{"name": "functions.get_weather", "arguments": {"city": "Rome"}}</tool_call>)", kWeather);
  ASSERT_EQ(r.call_count(), 1u);
  EXPECT_EQ(r.message["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_TRUE(r.has_issue(CallIssue::kNameNormalized));
  auto unknown = parse_tool_calls(
      R"(<tool_call>{"name": "get_weather_v2", "arguments": {"city": "Rome"}}</tool_call>)", kWeather);
  EXPECT_EQ(unknown.call_count(), 0u);
}

TEST(ToolCallParse, PythonPositionalArgumentMapsToTheRequiredParameter) {
  auto r = parse_tool_calls(R"(<|tool_call_start|>[get_weather("Rome")]<|tool_call_end|>)", kWeather);
  ASSERT_EQ(r.call_count(), 1u);
  EXPECT_EQ(r.message["tool_calls"][0]["function"]["arguments"], R"({"city":"Rome"})");
}

TEST(ToolCallParse, UnreadableBodyStaysTextWithANote) {
  std::string raw = "<tool_call>\nget the weather please\n</tool_call>";
  auto r = parse_tool_calls(raw, kWeather);
  EXPECT_EQ(r.call_count(), 0u);
  EXPECT_EQ(r.message.at("content"), raw);
  EXPECT_TRUE(r.has_issue(CallIssue::kInvalidCall));
}

TEST(ToolCallParse, MixedKnownAndUnknownInOneList) {
  auto r = parse_tool_calls(
      R"(<|tool_call_start|>[nope(x=1), get_weather(city="Oslo")]<|tool_call_end|>)", kWeather);
  ASSERT_EQ(r.call_count(), 1u);
  EXPECT_EQ(r.message["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_TRUE(r.has_issue(CallIssue::kUnknownTool));
}

TEST(ToolCallParse, JsonInProseBetweenSentences) {
  auto r = parse_tool_calls(
      "I will call {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}} now.", kWeather);
  ASSERT_EQ(r.call_count(), 1u);
  EXPECT_EQ(r.message.at("content"), "I will call\nnow.");
}

TEST(ToolCallParse, ReasoningLeftInContentWhenNotExtracted) {
  ToolCallParseOptions o;
  o.extract_reasoning = false;
  auto r = parse_tool_calls("<think>hmm</think>Done.", kWeather, o);
  EXPECT_EQ(r.message.at("content"), "<think>hmm</think>Done.");
  EXPECT_FALSE(r.message.contains("reasoning_content"));
}

TEST(ToolCallParse, UnclosedThinkingIsAllReasoning) {
  auto r = parse_tool_calls(
      "<think>I might call <tool_call>{\"name\": \"get_weather\", \"arguments\": {}}</tool_call>", kWeather);
  EXPECT_EQ(r.call_count(), 0u);
  EXPECT_EQ(r.message.at("content"), "");
  EXPECT_EQ(r.message.at("reasoning_content"),
            "I might call <tool_call>{\"name\": \"get_weather\", \"arguments\": {}}</tool_call>");
}

TEST(ToolCallParse, InvalidUtf8BecomesReplacementCharacters) {
  std::string raw = "caf\xC3 \xFF<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"\xE6\x97\"}}</tool_call>";
  auto r = parse_tool_calls(raw, kWeather);
  std::string dumped = dump_json(r.message);
  EXPECT_TRUE(is_valid_utf8(dumped));
  EXPECT_EQ(r.message.at("content"), "caf\xEF\xBF\xBD \xEF\xBF\xBD");
  ASSERT_EQ(r.call_count(), 1u);
  EXPECT_NO_THROW((void)r.message.dump());
}

TEST(ToolCallParse, MissingRequiredIsReportedButCallKept) {
  auto r = parse_tool_calls(R"(<tool_call>{"name": "get_weather", "arguments": {"days": 2}}</tool_call>)", kWeather);
  ASSERT_EQ(r.call_count(), 1u);
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_EQ(r.notes[0].issue, CallIssue::kMissingRequired);
  EXPECT_EQ(r.notes[0].call, 0);
  EXPECT_EQ(r.notes[0].detail, "city");
}

TEST(ToolCallParse, OnlyTheHeadOfAnOversizedInputIsRead) {
  ToolCallParseOptions o;
  o.max_input_bytes = 10;
  auto r = parse_tool_calls("0123456789abcdef", kWeather, o);
  EXPECT_EQ(r.message.at("content"), "0123456789");
  EXPECT_TRUE(r.has_issue(CallIssue::kInputTruncated));
}

TEST(ToolCallParse, Deterministic) {
  for (const auto& c : fixture_cases()) {
    std::string raw = c.c.at("raw").get<std::string>();
    auto a = parse_tool_calls(raw, fixture_tools());
    auto b = parse_tool_calls(raw, fixture_tools());
    EXPECT_EQ(a.message.dump(), b.message.dump()) << c.label;
    EXPECT_EQ(a.notes.size(), b.notes.size()) << c.label;
  }
}

TEST(ToolCallParse, EveryTruncationOfEveryFixtureIsSafe) {
  for (const auto& c : fixture_cases()) {
    std::string raw = c.c.at("raw").get<std::string>();
    for (size_t n = 0; n <= raw.size(); ++n) {
      auto r = parse_tool_calls(std::string_view(raw).substr(0, n), fixture_tools());
      ASSERT_TRUE(is_valid_utf8(dump_json(r.message))) << c.label << " at " << n;
      for (const auto& call : r.message.value("tool_calls", json::array())) {
        auto args = parse_strict_json(call["function"]["arguments"].get<std::string>());
        ASSERT_TRUE(args && args->is_object()) << c.label << " at " << n;
      }
    }
  }
}

TEST(ToolCallParse, AdversarialInputsStayLinear) {
  const std::pair<const char*, std::string> inputs[] = {
      {"plain text", std::string(200000, 'x')},
      {"many tool_call", [] { std::string s; for (int i = 0; i < 40000; ++i) s += "<tool_call>"; return s; }()},
      {"many function", [] { std::string s; for (int i = 0; i < 40000; ++i) s += "<function=a><parameter=b>"; return s; }()},
      {"many braces", std::string(300000, '{')},
      {"open strings", [] { std::string s; for (int i = 0; i < 40000; ++i) s += "{\"a\":\""; return s; }()},
      {"lfm lists", [] { std::string s; for (int i = 0; i < 30000; ++i) s += "<|tool_call_start|>[f(a=["; return s; }()},
  };
  for (const auto& input : inputs) {
    const char* label = input.first;
    ToolCallParseResult r;
    // The thread's CPU time, not the wall clock (a loaded machine stretches that): a quadratic
    // pass over these few hundred kilobytes would take minutes.
    const double ms = testing::cpu_ms([&] { r = parse_tool_calls(input.second, kWeather); });
    EXPECT_LT(ms, 3000) << label;
    EXPECT_TRUE(r.message.contains("content")) << label;
  }
}

}  // namespace
}  // namespace kvgate::rescue
