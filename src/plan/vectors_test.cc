// The published test vectors of reference/kv_estimation.md §6 and the seed report's cases,
// reproduced from metadata-only models with those hyperparameters. Expected figures are the
// MiB values the engines logged (two decimals, as llama.cpp prints them).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "gguf/synth.h"
#include "plan/memory_model.h"
#include "testing/test_models.h"

namespace kvgate::plan {
namespace {

using testing::MetaModel;

std::string mib(uint64_t bytes) { return fmt::format("{:.2f}", static_cast<double>(bytes) / 1048576.0); }

ServerSettings settings(uint32_t ctx, std::string k = "f16", std::string v = "", uint32_t parallel = 1) {
  ServerSettings s;
  s.ctx = ctx;
  s.cache_type_k = k;
  s.cache_type_v = v.empty() ? k : v;
  s.parallel = parallel;
  return s;
}

MemoryPlan plan(const ModelDescriptor& m, const ServerSettings& s, Fork fork = Fork::kMainline) {
  auto p = plan_memory(m, s, {.fork = fork});
  EXPECT_TRUE(p.ok()) << p.error().message();
  return p.ok() ? *p : MemoryPlan{};
}

// Dense GQA shapes (llama / qwen3moe / qwen3 / qwen3vl).
ModelDescriptor dense(std::string arch, uint32_t layers, uint32_t heads, uint32_t heads_kv, uint32_t head_dim,
                      uint32_t embd) {
  auto d = MetaModel(arch)
               .u32("block_count", layers)
               .u32("embedding_length", embd)
               .u32("attention.head_count", heads)
               .u32("attention.head_count_kv", heads_kv)
               .u32("attention.key_length", head_dim)
               .u32("attention.value_length", head_dim)
               .u32("context_length", 262144)
               .describe();
  EXPECT_TRUE(d.ok()) << d.error().message();
  return *d;
}

TEST(Vectors, V1_Llama3_8B) {
  gguf::SynthSpec s = *gguf::synth_defaults("llama");
  s.n_layer = 32;
  s.n_embd = 4096;
  s.n_head = 32;
  s.n_head_kv = 8;
  s.head_dim = 128;
  s.n_ff = 14336;
  s.n_vocab = 128256;
  auto m = testing::describe_synth(s);
  ASSERT_TRUE(m.ok()) << m.error().message();
  ServerSettings st = settings(8192);
  st.flash_attn = FlashAttn::kOff;
  MemoryPlan p = plan(*m, st);
  ASSERT_EQ(p.caches.size(), 1u);
  EXPECT_EQ(mib(p.caches[0].bytes()), "1024.00");
  EXPECT_EQ(mib(p.caches[0].k_bytes), "512.00");
  EXPECT_EQ(mib(p.caches[0].v_bytes), "512.00");
  EXPECT_EQ(mib(plan(*m, settings(512)).kv_bytes()), "64.00");  // #1b
}

TEST(Vectors, V3_Qwen3_235B_BothForks) {
  ModelDescriptor m = dense("qwen3moe", 94, 64, 4, 128, 4096);
  for (Fork fork : {Fork::kMainline, Fork::kIk}) {
    EXPECT_EQ(mib(plan(m, settings(32768), fork).kv_bytes()), "6016.00") << fork_name(fork);
    EXPECT_EQ(mib(plan(m, settings(32768, "q8_0"), fork).kv_bytes()), "3196.00") << fork_name(fork);
  }
}

TEST(Vectors, V4_Qwen3_30B_A3B) {
  gguf::SynthSpec s = *gguf::synth_defaults("qwen3");
  s.n_layer = 48;
  s.n_embd = 2048;
  s.n_head = 32;
  s.n_head_kv = 4;
  s.head_dim = 128;
  auto m = testing::describe_synth(s);
  ASSERT_TRUE(m.ok()) << m.error().message();
  EXPECT_EQ(mib(plan(*m, settings(4096)).kv_bytes()), "384.00");
}

TEST(Vectors, V5_Qwen3VL_8B) {
  ModelDescriptor m = dense("qwen3vl", 36, 32, 8, 128, 4096);
  EXPECT_EQ(mib(plan(m, settings(8192)).kv_bytes()), "1152.00");
  EXPECT_EQ(mib(plan(m, settings(8192, "q8_0")).kv_bytes()), "612.00");
}

// Qwen3.5-27B as published: 65 blocks (64 trunk + 1 MTP), 16 full-attention layers.
ModelDescriptor qwen35_27b_with_mtp() {
  auto d = MetaModel("qwen35")
               .u32("block_count", 65)
               .u32("nextn_predict_layers", 1)
               .u32("embedding_length", 5120)
               .u32("attention.head_count", 24)
               .u32("attention.head_count_kv", 4)
               .u32("attention.key_length", 256)
               .u32("attention.value_length", 256)
               .u32("context_length", 262144)
               .u32("full_attention_interval", 4)
               .u32("ssm.conv_kernel", 4)
               .u32("ssm.inner_size", 6144)
               .u32("ssm.state_size", 128)
               .u32("ssm.group_count", 16)
               .u32("ssm.time_step_rank", 48)
               .describe();
  EXPECT_TRUE(d.ok()) << d.error().message();
  return *d;
}

TEST(Vectors, V6_Qwen35_27B_FourSlotsUnified) {
  ModelDescriptor m = qwen35_27b_with_mtp();
  EXPECT_EQ(m.count_kv_layers(false), 16u);
  EXPECT_EQ(m.count_recurrent_layers(), 48u);
  EXPECT_FALSE(m.layers[64].kv) << "the MTP block holds no KV in the main context";
  ServerSettings s = settings(131072, "q8_0", "", 4);
  s.kv_unified = true;
  MemoryPlan p = plan(m, s);
  ASSERT_EQ(p.caches.size(), 1u);
  EXPECT_EQ(p.caches[0].cells, 131072u);
  EXPECT_EQ(mib(p.caches[0].bytes()), "4352.00");
  EXPECT_EQ(mib(p.caches[0].k_bytes), "2176.00");
  EXPECT_EQ(mib(p.caches[0].v_bytes), "2176.00");
  ASSERT_TRUE(p.recurrent);
  EXPECT_EQ(p.recurrent->rows, 4u);
  EXPECT_EQ(p.recurrent->logged_layers, 64u);
  EXPECT_EQ(mib(p.recurrent->bytes()), "598.50");
  EXPECT_EQ(mib(p.recurrent->r_bytes), "22.50");
  EXPECT_EQ(mib(p.recurrent->s_bytes), "576.00");
  EXPECT_EQ(mib(plan(m, settings(32768, "q8_0")).kv_bytes()), "1088.00");  // #6c
}

TEST(Vectors, V6_SameFromTheSynthPreset) {
  auto m = testing::describe_synth(gguf::find_synth_preset("qwen35-27b")->spec);
  ASSERT_TRUE(m.ok()) << m.error().message();
  ServerSettings s = settings(131072, "q8_0", "", 4);
  s.kv_unified = true;
  MemoryPlan p = plan(*m, s);
  EXPECT_EQ(mib(p.kv_bytes()), "4352.00");
  EXPECT_EQ(mib(p.recurrent_bytes()), "598.50");
}

ModelDescriptor qwen35(uint32_t layers, uint32_t heads_kv, uint32_t d_inner) {
  auto d = MetaModel("qwen35")
               .u32("block_count", layers)
               .u32("embedding_length", 4096)
               .u32("attention.head_count", 16)
               .u32("attention.head_count_kv", heads_kv)
               .u32("attention.key_length", 256)
               .u32("attention.value_length", 256)
               .u32("context_length", 262144)
               .u32("full_attention_interval", 4)
               .u32("ssm.conv_kernel", 4)
               .u32("ssm.inner_size", d_inner)
               .u32("ssm.state_size", 128)
               .u32("ssm.group_count", 16)
               .u32("ssm.time_step_rank", d_inner / 128)
               .describe();
  EXPECT_TRUE(d.ok()) << d.error().message();
  return *d;
}

TEST(Vectors, V7_Qwen35_9B) {
  ModelDescriptor m = qwen35(32, 4, 4096);
  ServerSettings s = settings(135168, "f16", "", 4);
  s.kv_unified = true;
  MemoryPlan p = plan(m, s);
  EXPECT_EQ(mib(p.kv_bytes()), "4224.00");
  EXPECT_EQ(mib(p.recurrent_bytes()), "201.00");
  EXPECT_EQ(mib(p.recurrent->r_bytes), "9.00");
  EXPECT_EQ(mib(p.recurrent->s_bytes), "192.00");
  EXPECT_EQ(mib(plan(m, settings(135168)).recurrent_bytes()), "50.25");
}

TEST(Vectors, V8_Qwen35_Small24L) {
  ModelDescriptor m = qwen35(24, 2, 2048);
  ServerSettings s = settings(262144, "f16", "", 4);
  s.kv_unified = true;
  MemoryPlan p = plan(m, s);
  EXPECT_EQ(mib(p.kv_bytes()), "3072.00");
  EXPECT_EQ(mib(p.recurrent_bytes()), "77.06");
  EXPECT_EQ(mib(p.recurrent->r_bytes), "5.06");
  EXPECT_EQ(mib(p.recurrent->s_bytes), "72.00");
}

TEST(Vectors, V9_GptOss20B_SlidingWindow) {
  auto m = MetaModel("gpt-oss")
               .u32("block_count", 24)
               .u32("embedding_length", 2880)
               .u32("attention.head_count", 64)
               .u32("attention.head_count_kv", 8)
               .u32("attention.key_length", 64)
               .u32("attention.value_length", 64)
               .u32("attention.sliding_window", 128)
               .u32("context_length", 131072)
               .describe();
  ASSERT_TRUE(m.ok()) << m.error().message();
  ServerSettings s = settings(131072);
  s.ubatch = 512;
  MemoryPlan p = plan(*m, s);
  const CacheBill* base = p.cache(CacheRole::kMain);
  const CacheBill* swa = p.cache(CacheRole::kSwa);
  ASSERT_TRUE(base && swa);
  EXPECT_EQ(base->layers, 12u);
  EXPECT_EQ(mib(base->bytes()), "3072.00");
  EXPECT_EQ(swa->layers, 12u);
  EXPECT_EQ(swa->cells, 768u);
  EXPECT_EQ(mib(swa->bytes()), "18.00");
}

TEST(Vectors, V11_Laguna_DenseFirstSlidingWindow) {
  auto m = MetaModel("laguna")
               .u32("block_count", 48)
               .u32("embedding_length", 4096)
               .u32("attention.head_count", 32)
               .u32("attention.head_count_kv", 8)
               .u32("attention.key_length", 128)
               .u32("attention.value_length", 128)
               .u32("attention.sliding_window", 512)
               .u32("context_length", 1048576)
               .describe();
  ASSERT_TRUE(m.ok()) << m.error().message();
  EXPECT_FALSE(m->layers[0].swa);
  EXPECT_TRUE(m->layers[1].swa);
  MemoryPlan p = plan(*m, settings(1048576, "q4_0"));
  EXPECT_EQ(p.cache(CacheRole::kMain)->layers, 12u);
  EXPECT_EQ(mib(p.cache(CacheRole::kMain)->bytes()), "13824.00");
  EXPECT_EQ(p.cache(CacheRole::kSwa)->cells, 1024u);
  EXPECT_EQ(mib(p.cache(CacheRole::kSwa)->bytes()), "40.50");
}

TEST(Vectors, V13_MuseGlimmer) {
  auto m = MetaModel("muse-glimmer")
               .u32("block_count", 52)
               .u32("embedding_length", 4096)
               .u32("attention.head_count", 32)
               .u32("attention.head_count_kv", 2)
               .u32("attention.key_length", 128)
               .u32("attention.value_length", 128)
               .u32("attention.sliding_window", 2048)
               .u32("attention.sliding_window_pattern", 4)
               .u32("context_length", 131072)
               .describe();
  ASSERT_TRUE(m.ok()) << m.error().message();
  MemoryPlan p = plan(*m, settings(32768));
  EXPECT_EQ(p.cache(CacheRole::kMain)->layers, 13u);
  EXPECT_EQ(mib(p.cache(CacheRole::kMain)->bytes()), "416.00");
  EXPECT_EQ(p.cache(CacheRole::kSwa)->cells, 2560u);
  EXPECT_EQ(mib(p.cache(CacheRole::kSwa)->bytes()), "97.50");
}

// GLM-5-class: 78 trunk layers + 1 nextn, MLA (576-element compressed K, no V), DSA indexer.
MetaModel glm_dsa(bool explicit_types) {
  MetaModel m("glm-dsa");
  m.u32("block_count", 79)
      .u32("nextn_predict_layers", 1)
      .u32("embedding_length", 6144)
      .u32("attention.head_count", 64)
      .u32("attention.head_count_kv", 1)
      .u32("attention.key_length", 576)
      .u32("attention.value_length", 512)
      .u32("attention.key_length_mla", 256)
      .u32("attention.value_length_mla", 256)
      .u32("attention.kv_lora_rank", 512)
      .u32("rope.dimension_count", 64)
      .u32("attention.indexer.key_length", 128)
      .u32("attention.indexer.head_count", 32)
      .u32("context_length", 1048576);
  if (explicit_types) {
    std::vector<uint32_t> types(78, 0);
    for (uint32_t il = 0; il < 21; ++il) types[il * 3] = 1;
    m.u32s("attention.indexer.types", types);
  }
  return m;
}

TEST(Vectors, V15_GlmDsa_VlessMlaAndIndexer) {
  for (bool explicit_types : {false, true}) {
    auto m = glm_dsa(explicit_types).describe();
    ASSERT_TRUE(m.ok()) << m.error().message();
    EXPECT_TRUE(m->mla);
    EXPECT_EQ(m->count_indexer_layers(), 21u);
    MemoryPlan p = plan(*m, settings(524288));
    const CacheBill* main = p.cache(CacheRole::kMain);
    const CacheBill* idx = p.cache(CacheRole::kIndexer);
    ASSERT_TRUE(main && idx);
    EXPECT_EQ(main->layers, 78u);
    EXPECT_EQ(main->v_bytes, 0u);
    EXPECT_EQ(mib(main->bytes()), "44928.00");
    EXPECT_EQ(mib(idx->bytes()), "2688.00");
    MemoryPlan big = plan(*m, settings(768000));
    EXPECT_EQ(mib(big.cache(CacheRole::kMain)->bytes()), "65812.50");
    EXPECT_EQ(mib(big.cache(CacheRole::kIndexer)->bytes()), "3937.50");
  }
}

TEST(Vectors, V16_DeepSeekCoderV2Lite_LegacyNonMla) {
  auto m = MetaModel("deepseek2")
               .u32("block_count", 27)
               .u32("embedding_length", 2048)
               .u32("attention.head_count", 16)
               .u32("attention.head_count_kv", 16)
               .u32("attention.key_length", 192)
               .u32("attention.value_length", 128)
               .u32("attention.kv_lora_rank", 512)
               .u32("rope.dimension_count", 64)
               .u32("context_length", 163840)
               .describe();
  ASSERT_TRUE(m.ok()) << m.error().message();
  EXPECT_FALSE(m->mla);
  MemoryPlan p = plan(*m, settings(16384, "f16", "", 8));
  ASSERT_EQ(p.caches.size(), 1u);
  EXPECT_EQ(p.caches[0].cells, 2048u);
  EXPECT_EQ(p.caches[0].streams, 8u);
  EXPECT_EQ(mib(p.caches[0].bytes()), "4320.00");
  EXPECT_EQ(mib(p.caches[0].k_bytes), "2592.00");
  EXPECT_EQ(mib(p.caches[0].v_bytes), "1728.00");
}

// The seed report: 48 layers × 4 KV heads × 128, q4_0, 256K → "≈ 6.9 GiB".
TEST(Seed, Qwen3_48Layers_Q4_0_At256K) {
  auto m = testing::describe_synth(gguf::find_synth_preset("qwen3-48l")->spec);
  ASSERT_TRUE(m.ok()) << m.error().message();
  for (Fork fork : {Fork::kMainline, Fork::kIk}) {
    EXPECT_EQ(mib(plan(*m, settings(262144, "q4_0"), fork).kv_bytes()), "6912.00") << fork_name(fork);
  }
}

// Qwen3.5-27B at 256K f16: 16,384 MiB, not the ≈ 66,560 MiB of the dense 65-layer formula.
TEST(Seed, Qwen35_27B_At256K_IsNotTheDenseFigure) {
  auto m = testing::describe_synth(gguf::find_synth_preset("qwen35-27b")->spec);
  ASSERT_TRUE(m.ok()) << m.error().message();
  MemoryPlan p = plan(*m, settings(262144));
  EXPECT_EQ(mib(p.kv_bytes()), "16384.00");
  const uint64_t dense65 = 65ULL * 4 * 256 * 2 * 2 * 262144;
  EXPECT_EQ(mib(dense65), "66560.00");
  EXPECT_LT(p.kv_bytes() * 4, dense65 + 1);
  EXPECT_EQ(mib(plan(*m, settings(262144, "q8_0")).kv_bytes()), "8704.00");
  EXPECT_EQ(mib(plan(*m, settings(262144, "q4_0")).kv_bytes()), "4608.00");
}

}  // namespace
}  // namespace kvgate::plan
