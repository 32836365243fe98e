#include "util/units.h"

#include <gtest/gtest.h>

namespace kvgate::util {
namespace {

TEST(UnitsTest, ParsesBinaryMemorySizes) {
  EXPECT_EQ(*parse_bytes("32GiB"), 32ULL << 30);
  EXPECT_EQ(*parse_bytes("6144MiB"), 6144ULL << 20);
  EXPECT_EQ(*parse_bytes("6144mib"), 6144ULL << 20);
  EXPECT_EQ(*parse_bytes("8G"), 8ULL << 30);
  EXPECT_EQ(*parse_bytes("1.5GiB"), 3ULL << 29);
  EXPECT_EQ(*parse_bytes("512KiB"), 512ULL << 10);
  EXPECT_EQ(*parse_bytes("100B"), 100U);
  EXPECT_EQ(*parse_bytes("2048"), 2048ULL << 20);  // bare number: MiB
}

TEST(UnitsTest, ParsesDecimalMemorySizes) {
  EXPECT_EQ(*parse_bytes("2GB"), 2000000000ULL);
  EXPECT_EQ(*parse_bytes("500MB"), 500000000ULL);
}

TEST(UnitsTest, RejectsBadSizes) {
  for (const char* bad : {"", "GiB", "12XB", "-1GiB", "1..2G", "abc", "99999999999999999999GiB"}) {
    auto r = parse_bytes(bad);
    EXPECT_FALSE(r.ok()) << bad;
  }
  EXPECT_NE(parse_bytes("12XB").error().message().find("12XB"), std::string::npos);
}

TEST(UnitsTest, ParsesTokenCounts) {
  EXPECT_EQ(*parse_tokens("4096"), 4096U);
  EXPECT_EQ(*parse_tokens("4k"), 4096U);
  EXPECT_EQ(*parse_tokens("256k"), 262144U);
  EXPECT_EQ(*parse_tokens("256K"), 262144U);
  EXPECT_EQ(*parse_tokens("1M"), 1048576U);
  EXPECT_FALSE(parse_tokens("4 GiB").ok());
  EXPECT_FALSE(parse_tokens("").ok());
}

TEST(UnitsTest, Formats) {
  EXPECT_EQ(format_mib(6912ULL << 20), "6912.00");
  EXPECT_EQ(format_mib(1024 * 1024 + 5 * 1024 * 1024 / 100 + 1), "1.05");
  EXPECT_EQ(format_bytes(812), "812 B");
  EXPECT_EQ(format_bytes(3ULL << 30), "3.00 GiB");
  EXPECT_EQ(format_tokens(131072), "128k");
  EXPECT_EQ(format_tokens(1048576), "1M");
  EXPECT_EQ(format_tokens(1000), "1000");
}

}  // namespace
}  // namespace kvgate::util
