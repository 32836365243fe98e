#include "http/sse.h"

#include <gtest/gtest.h>

namespace kvgate::http {
namespace {

std::vector<SseEvent> parse_in_pieces(std::string_view wire, size_t piece) {
  SseParser p;
  std::vector<SseEvent> all;
  for (size_t i = 0; i < wire.size(); i += piece) {
    auto ev = p.feed(wire.substr(i, piece));
    all.insert(all.end(), ev.begin(), ev.end());
  }
  return all;
}

TEST(SseParserTest, EventsAcrossEverySplit) {
  const std::string wire =
      "data: {\"a\":1}\n\n"
      ": ping\n\n"
      "event: progress\ndata: line1\ndata: line2\n\n"
      "data: [DONE]\n\n";
  for (size_t piece = 1; piece <= wire.size(); ++piece) {
    auto ev = parse_in_pieces(wire, piece);
    ASSERT_EQ(ev.size(), 4U) << piece;
    EXPECT_EQ(ev[0].data, "{\"a\":1}");
    EXPECT_EQ(ev[0].raw, "data: {\"a\":1}\n\n");
    EXPECT_TRUE(ev[1].comment_only);
    EXPECT_EQ(ev[1].raw, ": ping\n\n");
    EXPECT_EQ(ev[2].event, "progress");
    EXPECT_EQ(ev[2].data, "line1\nline2");
    EXPECT_TRUE(ev[3].is_done());
    std::string joined;
    for (const auto& e : ev) joined += e.raw;
    EXPECT_EQ(joined, wire) << piece;
  }
}

TEST(SseParserTest, StrayBlankLinesAreRelayedWithTheNextEvent) {
  // Blank lines that end no event complete nothing, but their bytes are not lost: relaying
  // every event's raw text still reproduces the stream.
  const std::string wire = "\n\r\ndata: a\r\n\r\n\n\ndata: b\n\n";
  for (size_t piece = 1; piece <= wire.size(); ++piece) {
    auto ev = parse_in_pieces(wire, piece);
    ASSERT_EQ(ev.size(), 2U) << piece;
    EXPECT_EQ(ev[0].data, "a");
    EXPECT_EQ(ev[1].data, "b");
    EXPECT_EQ(ev[0].raw + ev[1].raw, wire) << piece;
  }
}

TEST(SseParserTest, CrLfLineEnds) {
  const std::string wire = "data: x\r\n\r\ndata: y\r\n\r\n";
  for (size_t piece = 1; piece <= wire.size(); ++piece) {
    auto ev = parse_in_pieces(wire, piece);
    ASSERT_EQ(ev.size(), 2U) << piece;
    EXPECT_EQ(ev[0].data, "x");
    EXPECT_EQ(ev[1].data, "y");
    EXPECT_EQ(ev[0].raw + ev[1].raw, wire) << piece;
  }
}

TEST(SseParserTest, IncompleteEventIsPending) {
  SseParser p;
  EXPECT_TRUE(p.feed("data: {\"partial").empty());
  EXPECT_EQ(p.pending(), "data: {\"partial");
  auto ev = p.feed("\":true}\n\n");
  ASSERT_EQ(ev.size(), 1U);
  EXPECT_EQ(ev[0].data, "{\"partial\":true}");
}

TEST(SseParserTest, OverlongLineFails) {
  SseParser p(16);
  p.feed("data: 0123456789abcdefghij");
  EXPECT_TRUE(p.failed());
  EXPECT_TRUE(p.feed("\n\n").empty());
}

}  // namespace
}  // namespace kvgate::http
