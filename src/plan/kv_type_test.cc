#include "plan/kv_type.h"

#include <gtest/gtest.h>

namespace kvgate::plan {
namespace {

TEST(KvType, MainlineTypesAndSizes) {
  struct Row {
    const char* name;
    uint64_t bytes_per_128;
  };
  // 128 elements = 4 blocks of 32: bytes from ggml's block layouts.
  for (Row r : {Row{"f32", 512}, Row{"f16", 256}, Row{"bf16", 256}, Row{"q8_0", 136}, Row{"q4_0", 72},
                Row{"q4_1", 80}, Row{"iq4_nl", 72}, Row{"q5_0", 88}, Row{"q5_1", 96}}) {
    auto t = parse_kv_type(r.name, Fork::kMainline);
    ASSERT_TRUE(t.ok()) << r.name;
    EXPECT_EQ(*t->row_bytes(128), r.bytes_per_128) << r.name;
  }
  EXPECT_EQ(kv_type_names(Fork::kMainline).size(), 9u);
}

TEST(KvType, IkExtras) {
  auto q6 = parse_kv_type("q6_0", Fork::kIk);
  ASSERT_TRUE(q6.ok());
  EXPECT_EQ(*q6->row_bytes(128), 104u);  // 4 × 26
  auto q8kv = parse_kv_type("Q8_KV", Fork::kIk);
  ASSERT_TRUE(q8kv.ok());
  EXPECT_EQ(q8kv->name, "q8_KV");
  EXPECT_EQ(*q8kv->row_bytes(128), 136u);  // 128 + 8 bytes of row metadata
  EXPECT_EQ(kv_type_names(Fork::kIk).size(), 11u);
}

TEST(KvType, RefusalsNameTheAlternatives) {
  auto ik_only = parse_kv_type("q6_0", Fork::kMainline);
  ASSERT_FALSE(ik_only.ok());
  EXPECT_NE(ik_only.error().message().find("ik_llama.cpp"), std::string::npos);
  auto unknown = parse_kv_type("q3_K", Fork::kMainline);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message().find("q4_0"), std::string::npos);
  auto q4 = parse_kv_type("q4_0", Fork::kMainline);
  EXPECT_FALSE(q4->row_bytes(80).ok()) << "80 is not a multiple of the 32-element block";
}

TEST(KvType, PrecisionOrder) {
  auto m = kv_types_by_precision(Fork::kMainline);
  EXPECT_EQ(m.front(), "f16");
  EXPECT_EQ(m.back(), "q4_0");
  auto ik = kv_types_by_precision(Fork::kIk);
  EXPECT_NE(std::find(ik.begin(), ik.end(), "q6_0"), ik.end());
}

}  // namespace
}  // namespace kvgate::plan
