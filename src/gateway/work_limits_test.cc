#include "gateway/work_limits.h"

#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace kvgate::gateway {
namespace {

using nlohmann::json;

json chat() { return {{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}}; }

json enum_schema(size_t n) {
  json values = json::array();
  for (size_t i = 0; i < n; ++i) values.push_back(fmt::format("value-{:06d}", i));
  return {{"type", "json_schema"},
          {"json_schema", {{"name", "x"}, {"schema", {{"type", "string"}, {"enum", values}}}}}};
}

std::string alternatives_grammar(size_t n) {
  std::string g = "root ::= ";
  for (size_t i = 0; i < n; ++i) g += fmt::format("{}\"alt{}\"", i ? " | " : "", i);
  return g;
}

TEST(WorkLimitsTest, AnEnumAtTheLimitPassesOneMoreIsRefusedNamingTheLimit) {
  json body = chat();
  body["response_format"] = enum_schema(256);
  EXPECT_TRUE(check_work_limits(body).ok());
  body["response_format"] = enum_schema(257);
  auto r = check_work_limits(body);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().status, 400);
  EXPECT_EQ(r.error().code, "schema_too_complex");
  EXPECT_NE(r.error().message.find("257 alternatives"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("limit of 256"), std::string::npos) << r.error().message;
}

TEST(WorkLimitsTest, TheProbesFiftyThousandEntryEnumIsRefusedAsTooLarge) {
  json body = chat();
  body["response_format"] = enum_schema(50000);  // 489 KB in the probe
  auto r = check_work_limits(body);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().status, 413);
  EXPECT_EQ(r.error().param, "response_format");
}

TEST(WorkLimitsTest, AlternativesAddUpOverToolsAndTopLevelSchema) {
  json body = chat();
  json branches = json::array();
  for (int i = 0; i < 200; ++i) branches.push_back({{"const", i}});
  body["json_schema"] = {{"anyOf", branches}};
  body["tools"] = json::array(
      {{{"type", "function"},
        {"function",
         {{"name", "f"}, {"parameters", {{"type", "object"}, {"properties", {{"a", enum_schema(57)}}}}}}}}});
  auto r = check_work_limits(body);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("257 alternatives"), std::string::npos) << r.error().message;
}

TEST(WorkLimitsTest, DeepSchemaIsRefused) {
  json schema = {{"type", "string"}};
  for (int i = 0; i < 20; ++i) schema = {{"type", "object"}, {"properties", {{"a", schema}}}};
  json body = chat();
  body["json_schema"] = schema;
  auto r = check_work_limits(body);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("more than the limit of 32"), std::string::npos) << r.error().message;
}

TEST(WorkLimitsTest, GrammarAlternativesAndBytesAreBounded) {
  json body = chat();
  body["grammar"] = alternatives_grammar(513);  // 512 separators
  EXPECT_TRUE(check_work_limits(body).ok());
  body["grammar"] = alternatives_grammar(514);
  auto r = check_work_limits(body);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, "grammar_too_complex");
  body["grammar"] = alternatives_grammar(20000);
  r = check_work_limits(body);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().status, 413);
}

TEST(WorkLimitsTest, GrammarCountsSkipLiteralsClassesAndComments) {
  const GrammarCounts c = count_grammar("root ::= \"a|b\" | [|x] # a | b\nx ::= \"\\\"|\" | y\n");
  EXPECT_EQ(c.alternatives, 2u);
  EXPECT_EQ(c.rules, 2u);
}

TEST(WorkLimitsTest, ToolsLogitBiasAndStopCountsAreBounded) {
  json body = chat();
  body["tools"] = json::array();
  for (int i = 0; i < 257; ++i)
    body["tools"].push_back({{"type", "function"}, {"function", {{"name", "t"}}}});
  EXPECT_EQ(check_work_limits(body).error().code, "too_many_tools");
  body.erase("tools");
  body["logit_bias"] = json::object();
  for (int i = 0; i < 1025; ++i) body["logit_bias"][std::to_string(i)] = 1;
  EXPECT_EQ(check_work_limits(body).error().code, "too_many_logit_bias");
  body["logit_bias"].erase("0");
  EXPECT_TRUE(check_work_limits(body).ok());
  body["stop"] = json::array();
  for (int i = 0; i < 17; ++i) body["stop"].push_back("s");
  EXPECT_EQ(check_work_limits(body).error().code, "too_many_stop");
  body["stop"] = "one string";
  EXPECT_TRUE(check_work_limits(body).ok());
}

}  // namespace
}  // namespace kvgate::gateway
