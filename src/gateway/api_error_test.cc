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
