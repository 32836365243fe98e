#include "plan/model_desc.h"

#include <gtest/gtest.h>

#include "gguf/synth.h"
#include "testing/test_models.h"

namespace kvgate::plan {
namespace {

using testing::MetaModel;

TEST(ModelDesc, Qwen35LayerKindsAndState) {
  auto m = testing::describe_synth(*gguf::synth_defaults("qwen35"));
  ASSERT_TRUE(m.ok()) << m.error().message();
  EXPECT_TRUE(m->known_arch);
  ASSERT_EQ(m->layers.size(), 8u);
  for (uint32_t il = 0; il < 8; ++il) {
    EXPECT_EQ(m->layers[il].kv, il == 3 || il == 7) << il;
    EXPECT_EQ(m->layers[il].recurrent, !(il == 3 || il == 7)) << il;
  }
  // conv (4-1) × (inner 128 + 2 × 2 groups × 32 state) ; state 32 × 128
  EXPECT_EQ(m->n_embd_r, 3u * (128 + 2 * 2 * 32));
  EXPECT_EQ(m->n_embd_s, 32u * 128);
}

TEST(ModelDesc, Gemma3SlidingWindowPattern) {
  auto m = testing::describe_synth(*gguf::synth_defaults("gemma3"));
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->n_swa, 256u);
  for (uint32_t il = 0; il < 6; ++il) EXPECT_EQ(m->layers[il].swa, il != 5) << il;
  EXPECT_EQ(m->count_kv_layers(true), 5u);
  EXPECT_EQ(m->count_kv_layers(false), 1u);
}

TEST(ModelDesc, WeightsPerBlockAndTiedOutput) {
  auto m = testing::describe_synth(*gguf::synth_defaults("qwen3"));
  ASSERT_TRUE(m.ok());
  EXPECT_TRUE(m->tied_output);
  EXPECT_GT(m->token_embd_bytes, 0u);
  uint64_t sum = m->token_embd_bytes + m->output_bytes;
  for (const auto& l : m->layers) {
    EXPECT_GT(l.weight_bytes, 0u);
    sum += l.weight_bytes;
  }
  EXPECT_EQ(sum, m->tensor_bytes);
}

TEST(ModelDesc, PerLayerHeadCountArraysDecideHybridLayers) {
  // Jamba-style: recurrent where head_count_kv is 0.
  auto m = MetaModel("jamba")
               .u32("block_count", 4)
               .u32("embedding_length", 256)
               .u32("attention.head_count", 8)
               .u32s("attention.head_count_kv", {0, 0, 2, 0})
               .u32("ssm.conv_kernel", 4)
               .u32("ssm.inner_size", 512)
               .u32("ssm.state_size", 16)
               .describe();
  ASSERT_TRUE(m.ok()) << m.error().message();
  EXPECT_EQ(m->count_recurrent_layers(), 3u);
  EXPECT_TRUE(m->layers[2].kv);
  EXPECT_EQ(m->layers[2].n_head_kv, 2u);
  EXPECT_EQ(m->layers[2].k_len, 32u) << "default key length n_embd / n_head";
  EXPECT_EQ(m->n_embd_r, 3u * 512) << "Mamba-1: no groups";
  EXPECT_EQ(m->n_embd_s, 16u * 512);
}

TEST(ModelDesc, NemotronHMlpLayersHoldNothing) {
  auto m = MetaModel("nemotron_h")
               .u32("block_count", 4)
               .u32("embedding_length", 256)
               .u32("attention.head_count", 8)
               .u32s("attention.head_count_kv", {0, 0, 2, 0})
               .u32s("feed_forward_length", {0, 1024, 0, 0})
               .u32("ssm.conv_kernel", 4)
               .u32("ssm.inner_size", 512)
               .u32("ssm.state_size", 64)
               .u32("ssm.group_count", 8)
               .describe();
  ASSERT_TRUE(m.ok()) << m.error().message();
  EXPECT_TRUE(m->layers[0].recurrent);
  EXPECT_FALSE(m->layers[1].recurrent);
  EXPECT_FALSE(m->layers[1].kv);
  EXPECT_TRUE(m->layers[2].kv);
  EXPECT_TRUE(m->layers[3].recurrent);
}

TEST(ModelDesc, Gemma4SharedKvAndSwaLengths) {
  auto m = MetaModel("gemma4")
               .u32("block_count", 6)
               .u32("embedding_length", 512)
               .u32("attention.head_count", 8)
               .u32("attention.head_count_kv", 2)
               .u32("attention.key_length", 512)
               .u32("attention.value_length", 512)
               .u32("attention.key_length_swa", 256)
               .u32("attention.value_length_swa", 256)
               .u32("attention.sliding_window", 512)
               .bools("attention.sliding_window_pattern", {true, true, false, true, true, false})
               .u32("attention.shared_kv_layers", 2)
               .describe();
  ASSERT_TRUE(m.ok()) << m.error().message();
  EXPECT_EQ(m->layers[0].k_len, 256u);
  EXPECT_EQ(m->layers[2].k_len, 512u);
  EXPECT_FALSE(m->layers[4].kv);
  EXPECT_FALSE(m->layers[5].kv);
  EXPECT_EQ(m->count_kv_layers(true), 3u);  // layers 0, 1, 3
  EXPECT_EQ(m->count_kv_layers(false), 1u);
}

TEST(ModelDesc, FalconH1LayersHoldBoth) {
  auto m = MetaModel("falcon-h1")
               .u32("block_count", 3)
               .u32("embedding_length", 256)
               .u32("attention.head_count", 8)
               .u32("attention.head_count_kv", 2)
               .u32("ssm.conv_kernel", 4)
               .u32("ssm.inner_size", 512)
               .u32("ssm.state_size", 16)
               .u32("ssm.group_count", 1)
               .describe();
  ASSERT_TRUE(m.ok());
  for (const auto& l : m->layers) {
    EXPECT_TRUE(l.kv);
    EXPECT_TRUE(l.recurrent);
  }
}

TEST(ModelDesc, Lfm2ShortConvAndWindow) {
  auto m = MetaModel("lfm2")
               .u32("block_count", 4)
               .u32("embedding_length", 256)
               .u32("attention.head_count", 8)
               .u32s("attention.head_count_kv", {0, 2, 0, 2})
               .u32("shortconv.l_cache", 3)
               .u32("attention.sliding_window", 1024)
               .describe();
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->n_embd_r, 2u * 256);
  EXPECT_EQ(m->n_embd_s, 0u);
  EXPECT_TRUE(m->layers[1].swa);
  EXPECT_FALSE(m->layers[0].swa);
}

TEST(ModelDesc, MambaHasNoKv) {
  auto m = MetaModel("mamba2")
               .u32("block_count", 2)
               .u32("embedding_length", 256)
               .u32("ssm.conv_kernel", 4)
               .u32("ssm.inner_size", 512)
               .u32("ssm.state_size", 128)
               .u32("ssm.group_count", 1)
               .describe();
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->count_kv_layers(false), 0u);
  EXPECT_EQ(m->count_recurrent_layers(), 2u);
  EXPECT_EQ(m->n_embd_r, 3u * (512 + 2 * 128));
}

TEST(ModelDesc, UnknownArchitectureFallsBackToDense) {
  auto m = MetaModel("someday-lm")
               .u32("block_count", 3)
               .u32("embedding_length", 256)
               .u32("attention.head_count", 8)
               .describe();
  ASSERT_TRUE(m.ok());
  EXPECT_FALSE(m->known_arch);
  EXPECT_EQ(m->count_kv_layers(false), 3u);
  EXPECT_EQ(m->layers[0].n_head_kv, 8u) << "head_count_kv defaults to head_count";
  ASSERT_FALSE(m->notes.empty());
  EXPECT_NE(m->notes.back().find("someday-lm"), std::string::npos);
}

TEST(ModelDesc, Errors) {
  auto short_array = MetaModel("jamba")
                         .u32("block_count", 4)
                         .u32("embedding_length", 256)
                         .u32("attention.head_count", 8)
                         .u32s("attention.head_count_kv", {0, 2})
                         .describe();
  ASSERT_FALSE(short_array.ok());
  EXPECT_NE(short_array.error().message().find("exactly 4"), std::string::npos) << short_array.error().message();
  auto no_blocks = MetaModel("llama").u32("embedding_length", 256).describe();
  ASSERT_FALSE(no_blocks.ok());
  EXPECT_NE(no_blocks.error().message().find("block_count"), std::string::npos);
  auto no_window = MetaModel("gpt-oss").u32("block_count", 2).u32("attention.head_count", 8).describe();
  ASSERT_FALSE(no_window.ok());
  EXPECT_NE(no_window.error().message().find("sliding_window"), std::string::npos);
}

// The first malformed key ends the description with its own message: neither a later malformed
// key nor a rule's "required" check that follows it is reported instead.
TEST(ModelDesc, FirstMalformedKeyStopsTheRules) {
  auto hybrid = MetaModel("qwen35")
                    .u32("block_count", 4)
                    .u32("embedding_length", 256)
                    .u32("attention.head_count", 8)
                    .i32("ssm.conv_kernel", -1)
                    .u32s("attention.recurrent_layers", {1, 0})
                    .describe();
  ASSERT_FALSE(hybrid.ok());
  const std::string& first = hybrid.error().message();
  EXPECT_NE(first.find("qwen35.ssm.conv_kernel must be an unsigned integer"), std::string::npos) << first;
  EXPECT_EQ(first.find("recurrent_layers"), std::string::npos) << first;

  auto window = MetaModel("gpt-oss")
                    .u32("block_count", 2)
                    .u32("attention.head_count", 8)
                    .i32("attention.sliding_window", -1)
                    .describe();
  ASSERT_FALSE(window.ok());
  const std::string& bad_window = window.error().message();
  EXPECT_NE(bad_window.find("gpt-oss.attention.sliding_window must be an unsigned integer"), std::string::npos)
      << bad_window;
  EXPECT_EQ(bad_window.find("is required"), std::string::npos) << bad_window;

  auto pattern = MetaModel("gemma4")
                     .u32("block_count", 4)
                     .u32("attention.head_count", 8)
                     .u32("attention.sliding_window", 512)
                     .u32s("attention.sliding_window_pattern", {1, 0})
                     .describe();
  ASSERT_FALSE(pattern.ok());
  const std::string& short_pattern = pattern.error().message();
  EXPECT_NE(short_pattern.find("gemma4.attention.sliding_window_pattern has 2 entries"), std::string::npos)
      << short_pattern;
  EXPECT_EQ(short_pattern.find("is required"), std::string::npos) << short_pattern;
}

}  // namespace
}  // namespace kvgate::plan
