#include "http/content_coding.h"

#include <string>

#include <gtest/gtest.h>

#include "testing/encoders.h"

namespace kvgate::http {
namespace {

using testing::deflate_with;
using testing::gzip;
using testing::zstd;
std::string zlib_deflate(std::string_view in) { return deflate_with(in, MAX_WBITS); }
std::string raw_deflate(std::string_view in) { return deflate_with(in, -MAX_WBITS); }

const std::string kBody =
    R"({"model":"m","messages":[{"role":"user","content":"héllo, 世界"}],"stream":true})";

TEST(ContentCodingTest, EachCodingRoundTrips) {
  for (const auto& [coding, encoded] :
       {std::pair{"gzip", gzip(kBody)}, std::pair{"x-gzip", gzip(kBody)},
        std::pair{"deflate", zlib_deflate(kBody)}, std::pair{"deflate", raw_deflate(kBody)},
        std::pair{"zstd", zstd(kBody)}, std::pair{"GZip", gzip(kBody)}, std::pair{"identity", kBody}}) {
    auto r = decode_content(coding, encoded, 1 << 20);
    ASSERT_TRUE(r.ok()) << coding << ": " << r.error().message;
    EXPECT_EQ(r.value(), kBody) << coding;
  }
}

TEST(ContentCodingTest, StackedCodingsAreUndoneInReverse) {
  auto r = decode_content("gzip, zstd", zstd(gzip(kBody)), 1 << 20);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.value(), kBody);
  auto wrong_order = decode_content("zstd, gzip", zstd(gzip(kBody)), 1 << 20);
  ASSERT_FALSE(wrong_order.ok());
  EXPECT_EQ(wrong_order.error().status, 400);
}

TEST(ContentCodingTest, ABombStopsAtTheLimit) {
  const std::string zeros(64u << 20, '\0');  // 64 MiB of zeros: about 64 KB as gzip
  for (const auto& [coding, encoded] :
       {std::pair{"gzip", gzip(zeros)}, std::pair{"deflate", raw_deflate(zeros)},
        std::pair{"zstd", zstd(zeros)}}) {
    ASSERT_LT(encoded.size(), 1u << 20) << coding;
    auto r = decode_content(coding, encoded, 1 << 20);
    ASSERT_FALSE(r.ok()) << coding;
    EXPECT_EQ(r.error().status, 413) << coding;
    EXPECT_NE(r.error().message.find("1048576"), std::string::npos) << r.error().message;
  }
  // Exactly at the limit is fine.
  const std::string at_limit(1 << 20, 'a');
  EXPECT_TRUE(decode_content("gzip", gzip(at_limit), 1 << 20).ok());
  EXPECT_TRUE(decode_content("zstd", zstd(at_limit), 1 << 20).ok());
}

TEST(ContentCodingTest, UnknownCodingsAre415) {
  for (const char* coding : {"br", "compress", "gzip, br", "\xff\xfe", "gzip,gzip,gzip,gzip,gzip"}) {
    auto r = decode_content(coding, kBody, 1 << 20);
    ASSERT_FALSE(r.ok()) << coding;
    EXPECT_EQ(r.error().status, 415) << coding;
  }
}

TEST(ContentCodingTest, EveryTruncationAndCorruptionIsA400) {
  for (const auto& [coding, encoded] :
       {std::pair{"gzip", gzip(kBody)}, std::pair{"deflate", zlib_deflate(kBody)},
        std::pair{"zstd", zstd(kBody)}}) {
    for (size_t n = 0; n < encoded.size(); ++n) {
      auto r = decode_content(coding, encoded.substr(0, n), 1 << 20);
      if (r.ok()) {
        // Raw deflate may end early on a block boundary; what it gives is then a prefix.
        EXPECT_EQ(kBody.rfind(r.value(), 0), 0u) << coding << " cut at " << n;
        continue;
      }
      EXPECT_EQ(r.error().status, 400) << coding << " cut at " << n << ": " << r.error().message;
    }
    for (size_t i = 0; i < encoded.size(); ++i) {
      std::string bad = encoded;
      bad[i] = static_cast<char>(bad[i] ^ 0x5a);
      auto r = decode_content(coding, bad, 1 << 20);
      if (!r.ok()) {
        EXPECT_TRUE(r.error().status == 400 || r.error().status == 413) << coding << " byte " << i;
      }
    }
    auto trailing = decode_content(coding, encoded + "junk", 1 << 20);
    EXPECT_FALSE(trailing.ok() && trailing.value() == kBody + "junk") << coding;
  }
}

}  // namespace
}  // namespace kvgate::http
