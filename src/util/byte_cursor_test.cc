#include "util/byte_cursor.h"

#include <gtest/gtest.h>

#include <array>

namespace kvgate::util {
namespace {

std::array<std::byte, 6> sample() {
  return {std::byte{0x01}, std::byte{0x00}, std::byte{0x00}, std::byte{0x00},
          std::byte{0xff}, std::byte{0x7f}};
}

TEST(ByteCursorTest, ReadsLittleEndian) {
  auto data = sample();
  ByteCursor c(data);
  EXPECT_EQ(*c.read<uint32_t>("a u32"), 1U);
  EXPECT_EQ(*c.read<uint16_t>("a u16"), 0x7fffU);
  EXPECT_TRUE(c.at_end());
}

TEST(ByteCursorTest, ShortReadNamesOffsetAndExpectation) {
  auto data = sample();
  ByteCursor c(data, 100);
  ASSERT_TRUE(c.skip(4, "prefix").ok());
  auto r = c.read<uint64_t>("the tensor count");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(),
            "offset 104: expected the tensor count (8 bytes), but the data ends at offset 106 (2 bytes left)");
  // A failed read does not advance.
  EXPECT_EQ(c.offset(), 104U);
  EXPECT_EQ(*c.read<uint16_t>("u16"), 0x7fffU);
}

TEST(ByteCursorTest, HugeLengthsFailCleanly) {
  auto data = sample();
  ByteCursor c(data);
  EXPECT_FALSE(c.bytes(~0ULL, "a string").ok());
  EXPECT_FALSE(c.skip(7, "padding").ok());
  EXPECT_EQ(c.offset(), 0U);
}

}  // namespace
}  // namespace kvgate::util
