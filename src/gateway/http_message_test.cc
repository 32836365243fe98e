#include "gateway/http_message.h"

#include <gtest/gtest.h>

namespace kvgate::gateway {
namespace {

HeadParse parse(std::string_view s) { return parse_request_head(s, HeadLimits{}); }

TEST(HttpMessageTest, ParsesRequestLineHeadersAndQuery) {
  auto p = parse("POST /v1/chat%2Fcompletions?a=1&b=x+y HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nX-Session-Id:  s1 \r\n\r\nhello");
  ASSERT_EQ(p.state, HeadParse::State::kDone);
  EXPECT_EQ(p.head.request.method, "POST");
  EXPECT_EQ(p.head.request.path, "/v1/chat/completions");
  EXPECT_EQ(p.head.request.query_param("b"), "x y");
  EXPECT_EQ(p.head.request.header("x-session-id"), "s1");
  EXPECT_EQ(p.head.body_kind, BodyKind::kLength);
  EXPECT_EQ(p.head.content_length, 5U);
  EXPECT_EQ(p.head.head_bytes, std::string_view("POST /v1/chat%2Fcompletions?a=1&b=x+y HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nX-Session-Id:  s1 \r\n\r\n").size());
  EXPECT_TRUE(p.head.request.keep_alive());
}

TEST(HttpMessageTest, IncompleteUntilBlankLine) {
  EXPECT_EQ(parse("GET / HTTP/1.1\r\nHost: h\r\n").state, HeadParse::State::kIncomplete);
  EXPECT_EQ(parse("").state, HeadParse::State::kIncomplete);
}

TEST(HttpMessageTest, RejectsMalformedAndDangerousHeads) {
  struct Case { std::string text; int status; };
  for (const auto& [text, status] : std::vector<Case>{
           {"GET / HTTP/1.1\r\n\r\n", 400},                                       // no Host
           {"GET /  HTTP/1.1\r\nHost: h\r\n\r\n", 400},                           // double space
           {"GET x HTTP/1.1\r\nHost: h\r\n\r\n", 400},                            // relative target
           {"GET / HTTP/2.0\r\nHost: h\r\n\r\n", 505},
           {"GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", 400},
           {"GET / HTTP/1.1\r\nHost: h\r\nContent-Length: -1\r\n\r\n", 400},
           {"GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
           {"GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
           {"GET / HTTP/1.1\r\nHost: h\r\n folded\r\n\r\n", 400},
           {"GET / HTTP/1.1\r\nHost: h\r\nBad Header: x\r\n\r\n", 400},
           {"GET / HTTP/1.1\r\nHost: h\r\nX: a\x01" "b\r\n\r\n", 400},
           {"GET / HTTP/1.1\r\nHost: h\r\nExpect: bogus\r\n\r\n", 417},
       }) {
    auto p = parse(text);
    ASSERT_EQ(p.state, HeadParse::State::kError) << text;
    EXPECT_EQ(p.error.status, status) << text;
    EXPECT_FALSE(p.error.message.empty());
  }
}

TEST(HttpMessageTest, EnforcesHeadLimits) {
  HeadLimits limits;
  limits.max_head_bytes = 100;
  std::string big = "GET / HTTP/1.1\r\nHost: h\r\nX: " + std::string(200, 'a');
  auto p = parse_request_head(big, limits);  // no terminator yet, but already too big
  ASSERT_EQ(p.state, HeadParse::State::kError);
  EXPECT_EQ(p.error.status, 431);
  limits.max_target_bytes = 10;
  limits.max_head_bytes = 1000;
  auto q = parse_request_head("GET /0123456789abc HTTP/1.1\r\nHost: h\r\n\r\n", limits);
  EXPECT_EQ(q.error.status, 414);
}

TEST(HttpMessageTest, ConnectionSemantics) {
  auto p10 = parse("GET / HTTP/1.0\r\n\r\n");
  ASSERT_EQ(p10.state, HeadParse::State::kDone);
  EXPECT_FALSE(p10.head.request.keep_alive());
  auto close = parse("GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
  EXPECT_FALSE(close.head.request.keep_alive());
}

TEST(ChunkedDecoderTest, DecodesAcrossArbitrarySplits) {
  const std::string wire = "5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\nTrailer: x\r\n\r\n";
  for (size_t split = 0; split <= wire.size(); ++split) {
    ChunkedDecoder d(1000);
    std::string out;
    size_t used = d.feed(std::string_view(wire).substr(0, split), out);
    used += d.feed(std::string_view(wire).substr(used), out);
    EXPECT_EQ(d.state(), ChunkedDecoder::State::kDone) << split;
    EXPECT_EQ(out, "hello, world") << split;
  }
}

TEST(ChunkedDecoderTest, LimitsAndErrors) {
  ChunkedDecoder small(4);
  std::string out;
  small.feed("5\r\nhello\r\n0\r\n\r\n", out);
  EXPECT_EQ(small.state(), ChunkedDecoder::State::kTooLarge);
  ChunkedDecoder bad(100);
  bad.feed("zz\r\n", out);
  EXPECT_EQ(bad.state(), ChunkedDecoder::State::kError);
  ChunkedDecoder huge(100);
  huge.feed("ffffffffffffffffffff\r\n", out);
  EXPECT_NE(huge.state(), ChunkedDecoder::State::kNeedMore);
}

}  // namespace
}  // namespace kvgate::gateway
