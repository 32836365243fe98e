#include "util/utf8.h"

#include <gtest/gtest.h>

namespace kvgate::util {
namespace {

TEST(Utf8Test, ValidityAndRepair) {
  EXPECT_TRUE(is_valid_utf8("plain é 日本 \xF0\x9F\x98\x80"));
  EXPECT_FALSE(is_valid_utf8("\xC0\x80"));          // overlong
  EXPECT_FALSE(is_valid_utf8("\xED\xA0\x80"));      // a surrogate
  EXPECT_FALSE(is_valid_utf8("\xF4\x90\x80\x80"));  // past U+10FFFF
  EXPECT_FALSE(is_valid_utf8("\xE6\x97"));          // cut by the end
  EXPECT_EQ(sanitize_utf8("a\xff"
                          "b\xE6\x97"),
            "a\xEF\xBF\xBD"
            "b\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(Utf8Test, ClientIdsAreUtf8WithoutControlsAndBounded) {
  for (const std::string ok :
       {"", "s1", "cache:01a23505-dcc7-7a01-84ab-b7526b5a3b47", "sessão 日本 \xF0\x9F\x98\x80",
        R"({"device_id":"6609","session_id":"4c29"})", "a/b c\"d"}) {
    EXPECT_EQ(client_id_problem(ok), std::nullopt) << ok;
  }
  EXPECT_EQ(client_id_problem(std::string(kMaxClientIdBytes, 'x')), std::nullopt);
  EXPECT_EQ(client_id_problem(std::string(kMaxClientIdBytes + 1, 'x')), "is longer than 1024 bytes");
  EXPECT_EQ(client_id_problem("abc", 2), "is longer than 2 bytes");
  // The bytes of the reported defect: an X-Session-Id that is not UTF-8.
  EXPECT_EQ(client_id_problem("\xff\xfe-bad"), "is not valid UTF-8 (byte 0xff at offset 0)");
  EXPECT_EQ(client_id_problem("ok\xC3("), "is not valid UTF-8 (byte 0xc3 at offset 2)");
  EXPECT_EQ(client_id_problem("ok\xE6\x97"), "is not valid UTF-8 (byte 0xe6 at offset 2)");
  EXPECT_EQ(client_id_problem("\xC0\xAF"), "is not valid UTF-8 (byte 0xc0 at offset 0)");
  EXPECT_EQ(client_id_problem("a\nb"), "holds a control character (U+000A at offset 1)");
  EXPECT_EQ(client_id_problem(std::string("a\0b", 3)), "holds a control character (U+0000 at offset 1)");
  EXPECT_EQ(client_id_problem("tab\there"), "holds a control character (U+0009 at offset 3)");
  EXPECT_EQ(client_id_problem("del\x7f"), "holds a control character (U+007F at offset 3)");
  EXPECT_EQ(client_id_problem("c1\xC2\x85"), "holds a control character (U+0085 at offset 2)");
  EXPECT_EQ(client_id_problem("\x1b[31mred"), "holds a control character (U+001B at offset 0)");
  EXPECT_EQ(client_id_problem("nbsp\xC2\xA0"), std::nullopt) << "U+00A0 is not a control character";
  // Every single byte: the printable ASCII ones pass, the rest are refused.
  for (int b = 0; b < 256; ++b) {
    const std::string one(1, static_cast<char>(b));
    EXPECT_EQ(client_id_problem(one) == std::nullopt, b >= 0x20 && b < 0x7f) << b;
  }
}

}  // namespace
}  // namespace kvgate::util

namespace kvgate::util {
namespace {

TEST(Utf8Test, CompletePrefixHoldsBackOnlyACutSequence) {
  const std::string zh = "中";  // E4 B8 AD
  const std::string emoji = "\xF0\x9F\x98\x80";
  EXPECT_EQ(complete_utf8_prefix(""), 0u);
  EXPECT_EQ(complete_utf8_prefix("abc"), 3u);
  EXPECT_EQ(complete_utf8_prefix("a" + zh), 4u);
  EXPECT_EQ(complete_utf8_prefix("a" + zh.substr(0, 1)), 1u);
  EXPECT_EQ(complete_utf8_prefix("a" + zh.substr(0, 2)), 1u);
  EXPECT_EQ(complete_utf8_prefix("ab" + emoji.substr(0, 3)), 2u);
  EXPECT_EQ(complete_utf8_prefix("ab" + emoji), 6u);
  // Bytes that are no sequence at all are not held back (they become U+FFFD when written).
  EXPECT_EQ(complete_utf8_prefix("a\x80\x80\x80\x80"), 5u);
  // Split anywhere, the pieces rejoin to whole characters.
  const std::string text = "plan 中文 ✓ " + emoji + " end";
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    std::string pending = text.substr(0, cut);
    const size_t first = complete_utf8_prefix(pending);
    EXPECT_TRUE(is_valid_utf8(pending.substr(0, first))) << cut;
    EXPECT_TRUE(is_valid_utf8(pending.substr(first) + text.substr(cut))) << cut;
  }
}

}  // namespace
}  // namespace kvgate::util

namespace kvgate::util {
namespace {

TEST(Utf8Test, ToUtf16PairsAboveTheBasicPlaneAndRepairs) {
  EXPECT_EQ(to_utf16("a中"), u"a中");
  EXPECT_EQ(to_utf16("\xF0\x9F\x98\x80"), std::u16string({0xD83D, 0xDE00}));
  EXPECT_EQ(to_utf16("a\xFF"
                     "b"),
            std::u16string({u'a', 0xFFFD, u'b'}));
}

}  // namespace
}  // namespace kvgate::util
