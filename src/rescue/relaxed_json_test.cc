#include "rescue/relaxed_json.h"

#include <gtest/gtest.h>

namespace kvgate::rescue {
namespace {

using nlohmann::json;

json parse(std::string_view s, RelaxedOptions o = {}) {
  auto r = parse_relaxed_value(s, 0, o);
  EXPECT_TRUE(r.ok()) << s << ": " << (r.ok() ? "" : r.error().message());
  return r.ok() ? r->value : json("<error>");
}

TEST(RelaxedJson, StrictJsonIsReadAsIs) {
  auto r = parse_relaxed_value(R"(  {"a": [1, -2.5e1, true, false, null, "\u00e9\n"], "b": {}} tail)");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->value, json::parse(R"({"a": [1, -25.0, true, false, null, "é\n"], "b": {}})"));
  EXPECT_FALSE(r->relaxed);
  EXPECT_FALSE(r->truncated);
  EXPECT_EQ(r->end, std::string_view(R"(  {"a": [1, -2.5e1, true, false, null, "\u00e9\n"], "b": {}})").size());
}

TEST(RelaxedJson, AcceptsTheUsualSlips) {
  EXPECT_EQ(parse("{'a': 'it\\'s', b: True, c: None, d: False,}"),
            json({{"a", "it's"}, {"b", true}, {"c", nullptr}, {"d", false}}));
  EXPECT_EQ(parse("[1, 2, ]"), json({1, 2}));
  EXPECT_EQ(parse("\"line\nbreak\""), "line\nbreak");
  EXPECT_EQ(parse("+5"), 5);
  EXPECT_EQ(parse("'\\x41\\d'"), "A\\d");
  EXPECT_TRUE(parse_relaxed_value("{'a': 1}")->relaxed);
}

TEST(RelaxedJson, SurrogatesAndInvalidBytes) {
  EXPECT_EQ(parse(R"("\ud83d\ude00")"), "\xF0\x9F\x98\x80");
  EXPECT_EQ(parse(R"("\ud83d x")"), "\xEF\xBF\xBD x");
  EXPECT_EQ(parse("\"a\xFF" "b\""), "a\xEF\xBF\xBD" "b");
  EXPECT_EQ(parse("\"\xE6\x97\xA5\""), "\xE6\x97\xA5");
}

TEST(RelaxedJson, ErrorsNameTheOffset) {
  auto r = parse_relaxed_value("{\"a\" 1}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(), "offset 5: expected ':' after an object key");
  EXPECT_FALSE(parse_relaxed_value("").ok());
  EXPECT_FALSE(parse_relaxed_value("{\"a\": 1").ok());
  EXPECT_FALSE(parse_relaxed_value("nope").ok());
  EXPECT_FALSE(parse_relaxed_value("1", 5).ok());
}

TEST(RelaxedJson, DepthIsLimited) {
  std::string deep(100, '[');
  EXPECT_FALSE(parse_relaxed_value(deep + std::string(100, ']')).ok());
  EXPECT_TRUE(parse_relaxed_value(std::string(10, '[') + std::string(10, ']')).ok());
}

TEST(RelaxedJson, TruncatedInputIsClosedWhenAllowed) {
  RelaxedOptions t{.allow_truncated = true};
  auto r = parse_relaxed_value("{\"a\": 1, \"b\": \"xy", 0, t);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->truncated);
  EXPECT_EQ(r->value, json({{"a", 1}, {"b", "xy"}}));
  EXPECT_EQ(parse("{\"a\": 1, \"b\": tr", t), json({{"a", 1}}));
  EXPECT_EQ(parse("{\"a\": 1, \"b\"", t), json({{"a", 1}}));
  EXPECT_EQ(parse("[1, [2, \"x\\", t), json::parse("[1, [2, \"x\"]]"));
  EXPECT_EQ(parse("{\"a\": -", t), json::object());
  EXPECT_FALSE(parse_relaxed_value("  ", 0, t).ok());
}

TEST(CloseTruncatedJson, ClosesWhatWasCut) {
  EXPECT_EQ(close_truncated_json("{\"a\": 1, \"b\": \"x"), "{\"a\": 1, \"b\": \"x\"}");
  EXPECT_EQ(close_truncated_json("[{\"a\": [true, nul"), "[{\"a\": [true]}]");
  EXPECT_EQ(close_truncated_json("{\"a\": 1.5e"), "{}");
  EXPECT_EQ(close_truncated_json("{\"k\": \"\xE6\x97"), "{\"k\": \"\"}");
  EXPECT_EQ(close_truncated_json("{\"k\": \"a\\ud83d"), "{\"k\": \"a\"}");
  EXPECT_EQ(close_truncated_json("\"abc"), "\"abc\"");
}

TEST(CloseTruncatedJson, RefusesWhatIsNotATruncation) {
  EXPECT_EQ(close_truncated_json("{}"), std::nullopt);         // complete
  EXPECT_EQ(close_truncated_json(""), std::nullopt);           // nothing
  EXPECT_EQ(close_truncated_json("{'a': 1"), std::nullopt);    // not JSON
  EXPECT_EQ(close_truncated_json("{\"a\": 1}}"), std::nullopt);
  EXPECT_EQ(close_truncated_json("{\"a\" 1"), std::nullopt);
  EXPECT_EQ(close_truncated_json("[1,]"), std::nullopt);
  EXPECT_EQ(close_truncated_json("{\"a\": \"\x01"), std::nullopt);
  EXPECT_EQ(close_truncated_json("{\"a\": \"\\q"), std::nullopt);
  EXPECT_EQ(close_truncated_json(std::string(600, '[')), std::nullopt);
}

TEST(CloseTruncatedJson, EveryPrefixOfADocumentClosesToValidJson) {
  const std::string doc =
      R"({"a": [1, 22, -3.5e+2, "s\"\\\u00e9", {"b": null, "c": false}], "d": "日本", "e": {"f": [[]]}})";
  for (size_t n = 1; n < doc.size(); ++n) {
    auto closed = close_truncated_json(doc.substr(0, n));
    ASSERT_TRUE(closed) << n;
    EXPECT_TRUE(parse_strict_json(*closed)) << n << ": " << *closed;
  }
}

TEST(Utf8, ValidationAndSanitising) {
  EXPECT_TRUE(is_valid_utf8("plain é 日本 \xF0\x9F\x98\x80"));
  EXPECT_FALSE(is_valid_utf8("\xC0\x80"));          // overlong
  EXPECT_FALSE(is_valid_utf8("\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(is_valid_utf8("\xF4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(is_valid_utf8("\xE6\x97"));          // cut
  EXPECT_EQ(sanitize_utf8("a\xE6\x97" "b"), "a\xEF\xBF\xBD\xEF\xBF\xBD" "b");
  EXPECT_EQ(sanitize_utf8("ok"), "ok");
}

TEST(JsonHelpers, DumpNeverThrowsAndDepthIsCheckedIteratively) {
  json bad = std::string("\xFF");
  EXPECT_EQ(dump_json(bad), "\"\xEF\xBF\xBD\"");
  std::string deep(100000, '[');
  deep += std::string(100000, ']');
  json v = json::parse(deep);
  EXPECT_FALSE(json_depth_within(v, 1000));
  EXPECT_TRUE(json_depth_within(json::parse("[[1], {\"a\": [2]}]"), 3));
  EXPECT_FALSE(json_depth_within(json::parse("[[1], {\"a\": [2]}]"), 2));
  EXPECT_TRUE(json_depth_within(json(5), 0));
}

}  // namespace
}  // namespace kvgate::rescue
