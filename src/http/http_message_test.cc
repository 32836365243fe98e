#include "http/http_message.h"

#include <gtest/gtest.h>

namespace kvgate::http {
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

TEST(HttpMessageTest, NonHttpFirstBytesFailAtOnce) {
  HeadLimits l;
  // A TLS 1.2 ClientHello's first bytes: record type 0x16, version 3.1, length; no CRLF.
  static constexpr char kHello[] = "\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03";
  auto p = parse_request_head(std::string_view(kHello, sizeof kHello - 1), l);
  ASSERT_EQ(p.state, HeadParse::State::kError);
  EXPECT_EQ(p.error.status, 400);
  EXPECT_NE(p.error.message.find("TLS"), std::string::npos);
  // One byte is enough; a method being typed slowly is not refused.
  EXPECT_EQ(parse_request_head("\x16", l).state, HeadParse::State::kError);
  EXPECT_EQ(parse_request_head("\x80\x01", l).state, HeadParse::State::kError);
  EXPECT_EQ(parse_request_head("GE", l).state, HeadParse::State::kIncomplete);
  EXPECT_EQ(parse_request_head("GET /v1", l).state, HeadParse::State::kIncomplete);
  EXPECT_EQ(parse_request_head("GET\x01", l).state, HeadParse::State::kError);
}

TEST(HttpMessageTest, DuplicateHostIsRefused) {
  HeadLimits l;
  auto p = parse_request_head("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", l);
  ASSERT_EQ(p.state, HeadParse::State::kError);
  EXPECT_EQ(p.error.status, 400);
  EXPECT_NE(p.error.message.find("Host"), std::string::npos);
  EXPECT_EQ(parse_request_head("GET / HTTP/1.1\r\nHOST: a\r\nhost: a\r\n\r\n", l).state, HeadParse::State::kError);
  EXPECT_EQ(parse_request_head("GET / HTTP/1.1\r\nHost: a\r\n\r\n", l).state, HeadParse::State::kDone);
}

TEST(ChunkedDecoderTest, ChunkExtensionsAreBoundedPerChunk) {
  const ChunkedLimits limits{.max_body = 1000, .max_size_line = 64};
  std::string out;
  ChunkedDecoder ok(limits);
  ok.feed("3;name=value;x=\"q\"\r\nabc\r\n0;last\r\n\r\n", out);
  EXPECT_EQ(ok.state(), ChunkedDecoder::State::kDone);
  EXPECT_EQ(out, "abc");
  EXPECT_EQ(ok.framing_bytes(), 35u - 3u);
  ChunkedDecoder long_ext(limits);
  out.clear();
  const std::string line = "3;" + std::string(63, 'e') + "\r\n";  // 65 bytes before the CRLF
  EXPECT_EQ(long_ext.feed(line + "abc\r\n0\r\n\r\n", out), 65u) << "fails at the first byte over";
  EXPECT_EQ(long_ext.state(), ChunkedDecoder::State::kError);
  EXPECT_NE(long_ext.error().find("extensions"), std::string::npos);
  // Exactly at the limit is accepted.
  ChunkedDecoder at_limit(limits);
  at_limit.feed("3;" + std::string(62, 'e') + "\r\nabc\r\n0\r\n\r\n", out);
  EXPECT_EQ(at_limit.state(), ChunkedDecoder::State::kDone) << at_limit.error();
}

TEST(ChunkedDecoderTest, TrailersCountAgainstTheirLimits) {
  const ChunkedLimits limits{.max_body = 1000, .max_trailer_bytes = 100, .max_trailers = 3};
  std::string out;
  ChunkedDecoder ok(limits);
  ok.feed("1\r\na\r\n0\r\nX-A: 1\r\nX-B: 2\r\n\r\n", out);
  EXPECT_EQ(ok.state(), ChunkedDecoder::State::kDone);
  EXPECT_EQ(out, "a");
  ChunkedDecoder many(limits);
  many.feed("0\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n", out);
  EXPECT_EQ(many.state(), ChunkedDecoder::State::kTrailersTooLarge);
  ChunkedDecoder big(limits);
  big.feed("0\r\nA: " + std::string(200, 'v') + "\r\n\r\n", out);
  EXPECT_EQ(big.state(), ChunkedDecoder::State::kTrailersTooLarge);
  EXPECT_NE(big.error().find("100 bytes"), std::string::npos);
  // An endless trailer line fails at the byte limit, not when (if ever) it ends.
  ChunkedDecoder endless(limits);
  EXPECT_EQ(endless.feed("0\r\n" + std::string(5000, 'x'), out), 3u + 101u);
  EXPECT_EQ(endless.state(), ChunkedDecoder::State::kTrailersTooLarge);
}

}  // namespace
}  // namespace kvgate::http
