#include "gateway/request_checks.h"

#include <gtest/gtest.h>

namespace kvgate::gateway {
namespace {

http::HttpRequest head(std::string method, std::string path,
                       std::vector<std::pair<std::string, std::string>> headers = {}) {
  http::HttpRequest r;
  r.method = std::move(method);
  r.path = std::move(path);
  r.headers = std::move(headers);
  return r;
}

TEST(RequestChecksTest, IdsFromClientsAreUtf8WithoutControlsAndBounded) {
  EXPECT_TRUE(check_client_id("session-1", "X-Session-Id").ok());
  EXPECT_TRUE(check_client_id("", "user").ok());
  const auto bad = check_client_id("\xff\xfe-bad", "X-Session-Id");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().status, 400);
  EXPECT_EQ(bad.error().param, "X-Session-Id");
  EXPECT_EQ(bad.error().code, "invalid_id");
  EXPECT_EQ(
      bad.error().message,
      "X-Session-Id is not valid UTF-8 (byte 0xff at offset 0): an id must be valid UTF-8 without control "
      "characters, at most 1024 bytes");
  EXPECT_FALSE(check_client_id("a\x1b[2J", "prompt_cache_key").ok());
  EXPECT_FALSE(check_client_id(std::string(1025, 'x'), "user").ok());
}

TEST(RequestChecksTest, TheHeadsIdsAreChecked) {
  EXPECT_TRUE(check_request_head(head("GET", "/v1/responses/resp_1", {{"x-session-id", "s"}})).ok());
  const auto header =
      check_request_head(head("POST", "/v1/chat/completions", {{"x-session-id", "\xff\xfe-bad"}}));
  ASSERT_FALSE(header.ok());
  EXPECT_EQ(header.error().param, "X-Session-Id");
  for (const char* path : {"/v1/responses/\xff\xfe",
                           "/kvgate/v1/sessions/a\x01"
                           "b/compact",
                           "/kvgate/v1/sessions/\xc0\x80"}) {
    const auto r = check_request_head(head("GET", path));
    ASSERT_FALSE(r.ok()) << path;
    EXPECT_EQ(r.error().param, "path");
  }
}

}  // namespace
}  // namespace kvgate::gateway
