#include "gateway/request_limits.h"

#include <chrono>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "testing/cpu_time.h"

namespace kvgate::gateway {
namespace {

using nlohmann::json;

// The error a check refused with, if any.
std::optional<ApiError> refused(const ApiStatus& status) {
  return status.ok() ? std::nullopt : std::optional<ApiError>(status.error());
}

json chat(size_t messages, const std::string& content = "word") {
  json m = json::array();
  for (size_t i = 0; i < messages; ++i) m.push_back({{"role", i % 2 == 0 ? "user" : "assistant"}, {"content", content}});
  return {{"messages", m}};
}

TEST(RequestLimitsTest, TextDepthSkipsStringsAndFindsTheOffset) {
  EXPECT_EQ(json_text_depth_exceeded_at(R"({"a":[1,{"b":[]}]})", 4), std::string_view::npos);
  EXPECT_EQ(json_text_depth_exceeded_at(R"({"a":[1,{"b":[]}]})", 3), 13u);
  EXPECT_EQ(json_text_depth_exceeded_at(R"("[[[[[[" )", 1), std::string_view::npos);
  EXPECT_EQ(json_text_depth_exceeded_at(R"(["\"[[[["])", 1), std::string_view::npos);
  EXPECT_EQ(json_text_depth_exceeded_at(std::string(100000, '['), 512), 512u);
}

TEST(RequestLimitsTest, ScanNamesThePathWhereItStops) {
  const std::string doc = R"({"a":1,"messages":[{"role":"user","content":"x\"y"},{"k":[[1,2],[3]]}],"z":2})";
  EXPECT_EQ(scan_json_text(doc, 512, doc.find("x\\")).path, "messages[0].content");
  EXPECT_EQ(scan_json_text(doc, 512, doc.find("3]")).path, "messages[1].k[1][0]");
  EXPECT_EQ(scan_json_text(doc, 512, doc.find("2}")).path, "z");
  EXPECT_FALSE(scan_json_text(doc, 512).exceeded);
  const JsonTextScan deep = scan_json_text(doc, 4);
  EXPECT_TRUE(deep.exceeded);
  EXPECT_EQ(deep.offset, doc.find("[1,2"));
  EXPECT_EQ(deep.path, "messages[1].k[0]");
  EXPECT_EQ(first_overflowing_number(R"({"a":1e308,"b":"1e999","c":-1e999})"), 27u);
  EXPECT_EQ(first_overflowing_number(R"({"a":1})"), std::string_view::npos);
}

TEST(RequestLimitsTest, MessageCountIsBounded) {
  RequestLimits limits{.max_messages = 100};
  EXPECT_FALSE(refused(check_chat_limits(chat(100), limits)));
  auto e = refused(check_chat_limits(chat(101), limits));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->status, 413);
  EXPECT_EQ(e->code, "too_many_messages");
  EXPECT_EQ(e->param, "messages");
  EXPECT_NE(e->message.find("101 entries, more than the limit of 100"), std::string::npos) << e->message;
}

TEST(RequestLimitsTest, DeepToolCallArgumentsAreRefused) {
  auto with_args = [](const std::string& args) {
    json b = chat(1);
    b["messages"].push_back({{"role", "assistant"},
                             {"content", nullptr},
                             {"tool_calls", {{{"id", "c"}, {"function", {{"name", "f"}, {"arguments", args}}}}}}});
    return b;
  };
  RequestLimits limits;
  EXPECT_FALSE(refused(check_chat_limits(with_args(R"({"a":)" + std::string(511, '[') + std::string(511, ']') + "}"), limits)));
  auto e = refused(check_chat_limits(with_args(R"({"a":)" + std::string(100000, '[') + std::string(100000, ']') + "}"), limits));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->status, 400);
  EXPECT_EQ(e->code, "nesting_too_deep");
  EXPECT_EQ(e->param, "messages[1].tool_calls[0].function.arguments");
}

TEST(RequestLimitsTest, ANewestUserMessageThatCannotFitIsRefusedWithoutCounting) {
  RequestLimits limits{.context_tokens = 4096, .max_token_bytes = 16};
  // 65,536 bytes could be 4,096 tokens of 16 bytes: it might fit.
  EXPECT_FALSE(refused(check_chat_limits(chat(1, std::string(65536, 'a')), limits)));
  auto e = refused(check_chat_limits(chat(1, std::string(65536 + 16, 'a')), limits));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->status, 400);
  EXPECT_EQ(e->code, "context_length_exceeded");
  EXPECT_EQ(e->param, "messages[0].content");
  // Older messages may be long: compaction drops or summarises them.
  json b = chat(3, std::string(1 << 20, 'a'));
  b["messages"][2]["content"] = "short";
  EXPECT_FALSE(refused(check_chat_limits(b, limits)));
  // Text parts count too.
  json parts = chat(1);
  parts["messages"][0]["content"] = json::array({{{"type", "text"}, {"text", std::string(70000, 'a')}}});
  EXPECT_TRUE(refused(check_chat_limits(parts, limits)));
  // Unknown vocabulary or context: no claim is made.
  EXPECT_FALSE(refused(check_chat_limits(chat(1, std::string(1 << 20, 'a')), RequestLimits{.context_tokens = 4096})));
  // Malformed shapes are left to validation, never thrown on.
  EXPECT_FALSE(refused(check_chat_limits(json::parse(R"({"messages":[{"role":7},3,null]})"), limits)));
  EXPECT_FALSE(refused(check_chat_limits(json::array(), limits)));
}

// Work per input byte: the checks are linear and fast even at the body limit.
TEST(RequestLimitsTest, CheckingIsLinearInTheInput) {
  RequestLimits limits{.context_tokens = 4096, .max_token_bytes = 16};
  const json big = chat(4096, std::string(16 * 1024, 'a'));  // 64 MiB of content
  // The thread's CPU time: a loaded machine stretches the wall clock, not the work.
  const double ms = testing::cpu_ms([&] { (void)check_chat_limits(big, limits); });
  EXPECT_LT(ms, 1000.0);
}

}  // namespace
}  // namespace kvgate::gateway
