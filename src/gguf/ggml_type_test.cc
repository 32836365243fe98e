#include "gguf/ggml_type.h"

#include <gtest/gtest.h>

namespace kvgate::gguf {
namespace {

TEST(GgmlTypeTest, KvCacheTypesBytesPerElement) {
  // Bytes per element from reference/kv_estimation.md §2.
  struct Case { GgmlType t; double bpe; };
  for (auto [t, bpe] : {Case{GgmlType::F32, 4.0}, Case{GgmlType::F16, 2.0}, Case{GgmlType::BF16, 2.0},
                        Case{GgmlType::Q8_0, 1.0625}, Case{GgmlType::Q5_1, 0.75}, Case{GgmlType::Q5_0, 0.6875},
                        Case{GgmlType::Q4_1, 0.625}, Case{GgmlType::Q4_0, 0.5625}, Case{GgmlType::IQ4_NL, 0.5625}}) {
    auto traits = ggml_type_traits(t);
    ASSERT_TRUE(traits);
    EXPECT_DOUBLE_EQ(static_cast<double>(traits->block_bytes) / traits->block_size, bpe) << traits->name;
  }
}

TEST(GgmlTypeTest, KQuantsAreSuperBlocks) {
  EXPECT_EQ(*ggml_row_bytes(GgmlType::Q4_K, 4096), 4096 / 256 * 144U);
  EXPECT_EQ(*ggml_row_bytes(GgmlType::Q6_K, 256), 210U);
  EXPECT_FALSE(ggml_row_bytes(GgmlType::Q4_K, 128).ok());
}

TEST(GgmlTypeTest, RemovedTypesHaveNoLayout) {
  for (uint32_t removed : {4U, 5U, 31U, 32U, 33U, 36U, 37U, 38U, 43U, 1000U}) {
    EXPECT_FALSE(ggml_type_traits(removed)) << removed;
  }
  EXPECT_EQ(ggml_type_name(4), "type#4");
}

TEST(GgmlTypeTest, NamesRoundTrip) {
  EXPECT_EQ(ggml_type_from_name("Q8_0"), GgmlType::Q8_0);
  EXPECT_EQ(ggml_type_from_name("q4_k"), GgmlType::Q4_K);
  EXPECT_EQ(ggml_type_from_name("bf16"), GgmlType::BF16);
  EXPECT_FALSE(ggml_type_from_name("q6_0"));
  EXPECT_EQ(ggml_type_name(GgmlType::MXFP4), "mxfp4");
}

}  // namespace
}  // namespace kvgate::gguf
