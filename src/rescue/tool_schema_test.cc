#include "rescue/tool_schema.h"

#include <gtest/gtest.h>

namespace kvgate::rescue {
namespace {

using nlohmann::json;

const json kSchema = json::parse(R"({"type": "object", "properties": {
  "s": {"type": "string"}, "i": {"type": "integer"}, "n": {"type": "number"},
  "b": {"type": "boolean"}, "o": {"type": "object", "properties": {"k": {"type": "integer"}}},
  "a": {"type": "array", "items": {"type": "number"}}, "u": {"type": ["integer", "null"]},
  "e": {"enum": ["x", "y"]}, "any": {"anyOf": [{"type": "boolean"}, {"type": "array"}]},
  "free": {}}, "required": ["s", "i"]})");

json coerce(json args, std::vector<CallNote>& notes, bool text = false) {
  return coerce_arguments(std::move(args), kSchema, text, 0, notes);
}

std::vector<std::string> names(const std::vector<CallNote>& notes) {
  std::vector<std::string> out;
  for (const auto& n : notes) out.push_back(std::string(call_issue_name(n.issue)) + " " + n.detail);
  return out;
}

TEST(CoerceArguments, UnambiguousConversions) {
  std::vector<CallNote> notes;
  json out = coerce(json::parse(R"({"s": 5, "i": "42", "n": "2.5", "b": "False", "o": "{\"k\": \"7\"}",
      "a": "[1, \"2\"]", "u": "None", "any": "true"})"), notes);
  EXPECT_EQ(out, json::parse(R"({"s": "5", "i": 42, "n": 2.5, "b": false, "o": {"k": 7},
      "a": [1, 2], "u": null, "any": true})"));
  EXPECT_EQ(names(notes), (std::vector<std::string>{
      "coerced a: \"[1, \\\"2\\\"]\" -> [1,\"2\"]", "coerced a[1]: \"2\" -> 2",
      "coerced any: \"true\" -> true", "coerced b: \"False\" -> false",
      "coerced i: \"42\" -> 42", "coerced n: \"2.5\" -> 2.5",
      "coerced o: \"{\\\"k\\\": \\\"7\\\"}\" -> {\"k\":\"7\"}", "coerced o.k: \"7\" -> 7",
      "coerced s: 5 -> string", "coerced u: \"None\" -> null"}));
}

TEST(CoerceArguments, FittingValuesAreLeftAlone) {
  std::vector<CallNote> notes;
  json in = json::parse(R"({"s": "3", "i": 3, "n": 3, "b": true, "e": "x", "free": "7", "u": 1})");
  EXPECT_EQ(coerce(in, notes), in);
  EXPECT_TRUE(notes.empty()) << names(notes)[0];
}

TEST(CoerceArguments, IntegralFloatsBecomeIntegers) {
  std::vector<CallNote> notes;
  EXPECT_EQ(coerce(json::parse(R"({"s": "", "i": 3.0})"), notes)["i"], json(3));
  EXPECT_TRUE(coerce(json::parse(R"({"s": "", "i": 3.5})"), notes)["i"].is_number_float());
  EXPECT_EQ(names(notes).back(), "type_mismatch i: expected integer, got 3.5");
}

TEST(CoerceArguments, MismatchesAreReportedNotGuessed) {
  std::vector<CallNote> notes;
  json out = coerce(json::parse(R"({"s": "x", "i": "three", "b": 1, "u": "7x", "e": 4})"), notes);
  EXPECT_EQ(out["i"], "three");
  EXPECT_EQ(out["b"], 1);
  EXPECT_EQ(names(notes), (std::vector<std::string>{
      "type_mismatch b: expected boolean, got 1", "type_mismatch e: expected string, got 4",
      "type_mismatch i: expected integer, got \"three\"",
      "type_mismatch u: expected integer|null, got \"7x\""}));
}

TEST(CoerceArguments, MissingRequiredAndUnknownParameters) {
  std::vector<CallNote> notes;
  coerce(json::parse(R"({"zzz": 1})"), notes);
  EXPECT_EQ(names(notes), (std::vector<std::string>{"unknown_parameter zzz", "missing_required s",
                                                    "missing_required i"}));
}

TEST(CoerceArguments, TextValuesAreDecodedSilently) {
  std::vector<CallNote> notes;
  json out = coerce(json::parse(R"({"s": "a", "i": "40", "o": "{\"k\": 1}", "free": "true"})"), notes, true);
  EXPECT_EQ(out, json::parse(R"({"s": "a", "i": 40, "o": {"k": 1}, "free": "true"})"));
  EXPECT_TRUE(notes.empty());
}

TEST(CoerceArguments, SchemaWithoutPropertiesAndOddSchemas) {
  std::vector<CallNote> notes;
  json args = json::parse(R"({"x": "1"})");
  EXPECT_EQ(coerce_arguments(args, json(), false, 0, notes), args);
  EXPECT_EQ(coerce_arguments(args, json::parse(R"({"properties": 5, "required": [1, "x"]})"), false, 0, notes), args);
  EXPECT_EQ(coerce_arguments(json(7), kSchema, false, 0, notes), json(7));
  EXPECT_TRUE(notes.empty());
}

TEST(ToolSet, ResolvesExactPrefixedAndCaseInsensitiveNames) {
  ToolSet tools(json::parse(R"([{"type": "function", "function": {"name": "get_weather"}},
      {"function": {"name": "Read"}}, {"name": "flat", "parameters": {"type": "object"}},
      {"function": {"name": ""}}, "junk", {"function": {"name": "read"}}])"));
  EXPECT_EQ(tools.size(), 4u);
  bool normalized = false;
  ASSERT_NE(tools.resolve("get_weather", &normalized), nullptr);
  EXPECT_FALSE(normalized);
  ASSERT_NE(tools.resolve("functions.get_weather", &normalized), nullptr);
  EXPECT_TRUE(normalized);
  EXPECT_EQ(tools.resolve("GET_WEATHER")->name, "get_weather");
  EXPECT_EQ(tools.resolve("READ"), nullptr);  // "Read" and "read": ambiguous
  EXPECT_EQ(tools.resolve("read")->name, "read");
  EXPECT_EQ(tools.resolve("flat")->parameters, json::parse(R"({"type": "object"})"));
  EXPECT_EQ(tools.resolve("weather"), nullptr);
  EXPECT_TRUE(ToolSet(json()).empty());
}

}  // namespace
}  // namespace kvgate::rescue
