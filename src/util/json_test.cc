#include "util/json.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace kvgate::util
