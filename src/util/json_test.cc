#include "util/json.h"

#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <string>
#include <vector>

namespace kvgate::util {
namespace {

using nlohmann::json;

// The text must be what a copy with the member replaced dumps: the token counter's renders
// of a view are compared byte for byte with the engine's.
TEST(JsonTest, TextWithAMemberReplacedIsTheCopysText) {
  const json body = json::parse(R"({"b":1,"messages":[{"role":"user","content":"hi"}],"tools":[],"a":"x\u00e9"})");
  const json view = json::parse(R"([{"role":"user","content":"other \"quoted\""}])");
  for (const std::string key : {"messages", "0", "a", "aa", "zz", "tools"}) {
    json copy = body;
    copy[key] = view;
    EXPECT_EQ(json_text_with(body, key, view), json_text(copy)) << key;
  }
  EXPECT_EQ(json_text_with(json::object(), "messages", json::array()), R"({"messages":[]})");
}

TEST(JsonTest, InvalidUtf8IsReplacedNotThrown) {
  const json body = {{"messages", json::array()}, {"k\xff", "v\xfe"}};
  std::string text;
  ASSERT_NO_THROW(text = json_text_with(body, "messages", json::array({"\xc3("})));
  EXPECT_EQ(text, json_text(json{{"messages", json::array({"\xc3("})}, {"k\xff", "v\xfe"}}));
}

// A member written as text stands for the object's own value, in its place; an absent key
// or empty text changes nothing.
TEST(JsonTest, AWrittenMemberIsWrittenAsItsText) {
  const json body = json::parse(R"({"a":1,"tools":[{"z":1,"b":2}],"messages":[]})");
  const std::string ordered = R"([{"z":1,"b":2}])";
  EXPECT_EQ(json_text_with(body, {"tools", ordered}), R"({"a":1,"messages":[],"tools":[{"z":1,"b":2}]})");
  EXPECT_EQ(json_text_with(body, "messages", json::array({1}), {"tools", ordered}),
            R"({"a":1,"messages":[1],"tools":[{"z":1,"b":2}]})");
  EXPECT_EQ(json_text_with(body, {"tools", ""}), json_text(body));
  EXPECT_EQ(json_text_with(body, {"absent", ordered}), json_text(body));
}

// member_text finds a top-level member's value as written, past strings that hold braces,
// quotes and escapes, nested values of the same name, numbers, literals and spaces.
TEST(JsonTest, MemberTextIsTheTopLevelValueAsWritten) {
  const std::string text =
      R"( { "a" : "x\"}{[" , "n":-1.5e3,"t":true, "inner":{"tools":[0]},)"
      R"( "tools" : [ {"z":1, "b":"]}"} ] , "last":null } )";
  EXPECT_EQ(member_text(text, "tools"), R"([ {"z":1, "b":"]}"} ])");
  EXPECT_EQ(member_text(text, "a"), R"("x\"}{[")");
  EXPECT_EQ(member_text(text, "n"), "-1.5e3");
  EXPECT_EQ(member_text(text, "t"), "true");
  EXPECT_EQ(member_text(text, "last"), "null");
  EXPECT_EQ(member_text(text, "inner"), R"({"tools":[0]})");
  EXPECT_EQ(member_text(text, "absent"), std::nullopt);
  // Repeated: the last, as nlohmann::json keeps it.
  EXPECT_EQ(member_text(R"({"tools":[1],"tools":[2]})", "tools"), "[2]");
  EXPECT_EQ(json::parse(R"({"tools":[1],"tools":[2]})")["tools"], json::array({2}));
  // A key written with escapes, and texts that are not objects or are cut short.
  EXPECT_EQ(member_text(R"({"\u0074ools":[1]})", "tools"), std::nullopt);
  for (const char* bad : {"", "[1]", R"({"tools")", R"({"tools":[1)", R"({"tools":"x)", "{\"tools"}) {
    EXPECT_EQ(member_text(bad, "tools"), std::nullopt) << bad;
  }
  EXPECT_EQ(member_text("{}", "tools"), std::nullopt);
}

// Over generated objects (nested values, strings with quotes, braces and escapes, spaces
// between tokens): the text member_text finds parses to the object's own value of that key;
// every cut of such a text is read without a fault (the sanitizer build checks the reads) and
// yields no member: a cut object is not one.
TEST(JsonTest, MemberTextAgreesWithTheParserOnGeneratedObjects) {
  std::mt19937 rng(7);
  const std::vector<std::string> atoms = {"1", "-2.5e3", "true", "null", R"("a\"}{[")", R"("\u00e9\\")", R"("")"};
  std::function<std::string(int)> value = [&](int depth) -> std::string {
    const int kind = depth > 2 ? 0 : static_cast<int>(rng() % 3);
    if (kind == 0) return atoms[rng() % atoms.size()];
    std::string out = kind == 1 ? "[" : "{";
    const int n = static_cast<int>(rng() % 3);
    for (int i = 0; i < n; ++i) {
      if (i > 0) out += rng() % 2 ? "," : " , ";
      if (kind == 2) out += "\"k" + std::to_string(rng() % 4) + "\" :";
      out += value(depth + 1);
    }
    return out + (kind == 1 ? "]" : "}");
  };
  for (int round = 0; round < 300; ++round) {
    std::string text = "{";
    const int members = 1 + static_cast<int>(rng() % 5);
    for (int i = 0; i < members; ++i) {
      if (i > 0) text += rng() % 2 ? ", " : ",";
      text += "\"m" + std::to_string(rng() % 4) + "\":" + value(0);
    }
    text += " }";
    const json parsed = json::parse(text);
    for (int k = 0; k < 4; ++k) {
      const std::string key = "m" + std::to_string(k);
      const auto found = member_text(text, key);
      ASSERT_EQ(found.has_value(), parsed.contains(key)) << text;
      if (found) {
        EXPECT_EQ(json::parse(*found), parsed[key]) << text;
      }
    }
    for (size_t cut = 0; cut < text.size(); ++cut) {
      const std::string_view part(text.data(), cut);
      for (int k = 0; k < 4; ++k) {
        EXPECT_EQ(member_text(part, "m" + std::to_string(k)), std::nullopt) << part;
      }
    }
  }
}

}  // namespace
}  // namespace kvgate::util
