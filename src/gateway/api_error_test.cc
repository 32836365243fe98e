#include "gateway/api_error.h"

#include <gtest/gtest.h>

namespace kvgate::gateway {
namespace {

TEST(ApiErrorTest, OpenAiShape) {
  auto e = bad_request("messages[2].role must be a string", "messages[2].role");
  EXPECT_EQ(e.status, 400);
  auto j = e.to_json();
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "messages[2].role");
  EXPECT_EQ(j["error"]["message"], "messages[2].role must be a string");
  EXPECT_EQ(j["error"]["code"], "invalid_value");
}

TEST(ApiErrorTest, NullParamAndExtraFields) {
  auto e = unavailable("engine restarting", 5);
  e.extra["n_ctx"] = 4096;
  auto j = e.to_json();
  EXPECT_TRUE(j["error"]["param"].is_null());
  EXPECT_EQ(j["error"]["n_ctx"], 4096);
  EXPECT_EQ(e.status, 503);
  EXPECT_EQ(e.retry_after_s, 5);
}

}  // namespace
}  // namespace kvgate::gateway

namespace kvgate::gateway {
namespace {

// "no route for GET /\xff" (a percent-decoded path) must still be answerable JSON.
TEST(ApiErrorTest, InvalidUtf8InTheMessageIsReplacedNotThrown) {
  const ApiError e = not_found("no route for GET /\xff\xfe\xc3(");
  std::string body;
  ASSERT_NO_THROW(body = e.body());
  const auto j = nlohmann::json::parse(body);
  EXPECT_EQ(j["error"]["message"], "no route for GET /\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd(");
  ApiError p = bad_request("bad", std::string("a\xc0\x80"));
  ASSERT_NO_THROW(body = p.body());
}

}  // namespace
}  // namespace kvgate::gateway
