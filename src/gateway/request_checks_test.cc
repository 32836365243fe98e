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
  EXPECT_TRUE(check_request_head(head("GET", "/v1/responses/resp_1", {{"x-session-id", "s"}}), false).ok());
  const auto header =
      check_request_head(head("POST", "/v1/chat/completions", {{"x-session-id", "\xff\xfe-bad"}}), true);
  ASSERT_FALSE(header.ok());
  EXPECT_EQ(header.error().param, "X-Session-Id");
  for (const char* path : {"/v1/responses/\xff\xfe",
                           "/kvgate/v1/sessions/a\x01"
                           "b/compact",
                           "/kvgate/v1/sessions/\xc0\x80"}) {
    const auto r = check_request_head(head("GET", path), false);
    ASSERT_FALSE(r.ok()) << path;
    EXPECT_EQ(r.error().param, "path");
  }
}

TEST(RequestChecksTest, AJsonBodySaysSo) {
  for (const char* type :
       {"application/json", "application/json; charset=utf-8", " Application/JSON ",
        "application/json;charset=UTF-8", "application/vnd.api+json", "application/merge-patch+json"}) {
    EXPECT_TRUE(json_content_type(type, false)) << type;
    EXPECT_TRUE(json_content_type(type, true)) << type;
  }
  // What a page of another site can send without asking first, and near misses.
  for (const char* type : {"text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded",
                           "multipart/form-data; boundary=x", "text/json", "application/jsonx",
                           "application/+json", "application/json-seq", "json"}) {
    EXPECT_FALSE(json_content_type(type, false)) << type;
  }
  // No type: a client that is no browser (no Origin) is trusted to send JSON; a browser's POST is not.
  EXPECT_TRUE(json_content_type(std::nullopt, false));
  EXPECT_TRUE(json_content_type("", false));
  EXPECT_FALSE(json_content_type(std::nullopt, true));
}

TEST(RequestChecksTest, JsonRoutesRefuseOtherTypesWith415) {
  const auto r =
      check_request_head(head("POST", "/v1/chat/completions", {{"content-type", "text/plain"}}), true);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().status, 415);
  EXPECT_EQ(r.error().param, "Content-Type");
  EXPECT_EQ(r.error().code, "unsupported_media_type");
  EXPECT_NE(r.error().message.find("got 'text/plain'"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("-H 'Content-Type: application/json'"), std::string::npos);
  const auto browser =
      check_request_head(head("POST", "/v1/messages", {{"origin", "https://evil.example"}}), true);
  ASSERT_FALSE(browser.ok());
  EXPECT_NE(browser.error().message.find("none from a browser"), std::string::npos);
  EXPECT_TRUE(
      check_request_head(head("POST", "/v1/messages", {{"content-type", "application/json"}}), true).ok());
  EXPECT_TRUE(check_request_head(head("POST", "/v1/messages"), true).ok());
  EXPECT_TRUE(check_request_head(head("GET", "/v1/models", {{"content-type", "text/plain"}}), false).ok());
}

}  // namespace
}  // namespace kvgate::gateway
