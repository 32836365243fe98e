#include "plan/memory_model.h"

#include <gtest/gtest.h>

#include "gguf/synth.h"
#include "testing/test_models.h"

namespace kvgate::plan {
namespace {

using testing::MetaModel;

ModelDescriptor synth(std::string_view arch) {
  auto m = testing::describe_synth(*gguf::synth_defaults(arch));
  EXPECT_TRUE(m.ok()) << m.error().message();
  return *m;
}

ServerSettings with(uint32_t ctx, uint32_t parallel, std::optional<bool> unified = std::nullopt) {
  ServerSettings s;
  s.ctx = ctx;
  s.parallel = parallel;
  s.kv_unified = unified;
  return s;
}

TEST(MemoryModel, ContextPaddingAndStreams) {
  ModelDescriptor m = synth("qwen3");
  auto one = plan_memory(m, with(3000, 1), {});
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->n_ctx, 3072u);
  EXPECT_EQ(one->caches[0].cells, 3072u);
  // 3000 → 3072, / 4 slots = 768 per stream (already a multiple of 256).
  auto split = plan_memory(m, with(3000, 4), {});
  EXPECT_EQ(split->n_ctx_seq, 768u);
  EXPECT_EQ(split->caches[0].cells, 768u);
  EXPECT_EQ(split->caches[0].streams, 4u);
  // 4096 / 3 = 1365 → 1536 per stream, n_ctx grows to 4608.
  auto odd = plan_memory(m, with(4096, 3), {});
  EXPECT_EQ(odd->n_ctx_seq, 1536u);
  EXPECT_EQ(odd->n_ctx, 4608u);
  auto unified = plan_memory(m, with(3000, 4, true), {});
  EXPECT_EQ(unified->caches[0].cells, 3072u);
  EXPECT_EQ(unified->caches[0].streams, 1u);
  EXPECT_EQ(unified->caches[0].seqs, 4u);
  // Same bytes either way for a dense model at a divisible context.
  EXPECT_EQ(plan_memory(m, with(4096, 4), {})->kv_bytes(), plan_memory(m, with(4096, 4, true), {})->kv_bytes());
}

TEST(MemoryModel, SlidingWindowCells) {
  ModelDescriptor m = synth("gemma3");  // window 256
  ServerSettings s = with(16384, 1);
  auto p = plan_memory(m, s, {});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->cache(CacheRole::kSwa)->cells, 768u);  // pad(256 + 512)
  s.parallel = 4;
  s.kv_unified = true;
  EXPECT_EQ(plan_memory(m, s, {})->cache(CacheRole::kSwa)->cells, 1536u);  // pad(256 × 4 + 512)
  s.kv_unified = false;
  EXPECT_EQ(plan_memory(m, s, {})->cache(CacheRole::kSwa)->cells, 768u);   // per stream
  s.swa_full = true;
  EXPECT_EQ(plan_memory(m, s, {})->cache(CacheRole::kSwa)->cells, 4096u);
  s = with(512, 1);
  EXPECT_EQ(plan_memory(m, s, {})->cache(CacheRole::kSwa)->cells, 512u);  // never above the base cells
  // ik: no SWA cache, every layer full-size.
  auto ik = plan_memory(m, with(16384, 1), {.fork = Fork::kIk});
  ASSERT_EQ(ik->caches.size(), 1u);
  EXPECT_EQ(ik->caches[0].layers, 6u);
  EXPECT_EQ(ik->caches[0].cells, 16384u);
}

TEST(MemoryModel, RecurrentRows) {
  ModelDescriptor m = synth("qwen35");
  auto p = plan_memory(m, with(4096, 4), {});
  ASSERT_TRUE(p.ok() && p->recurrent.has_value());
  EXPECT_EQ(p->recurrent->rows, 4u);
  EXPECT_EQ(p->recurrent->layers, 6u);
  EXPECT_EQ(p->recurrent->logged_layers, 8u);
  EXPECT_EQ(p->recurrent->s_bytes, 4ULL * 6 * m.n_embd_s * 4);
}

TEST(MemoryModel, EngineRefusals) {
  ModelDescriptor m = synth("qwen3");
  ServerSettings s = with(4096, 1);
  s.cache_type_v = "q4_0";
  s.flash_attn = FlashAttn::kOff;
  auto r = plan_memory(m, s, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("flash attention"), std::string::npos);
  s.flash_attn = FlashAttn::kAuto;
  EXPECT_TRUE(plan_memory(m, s, {}).ok()) << "auto enables flash attention for a quantized V";
  s.cache_type_k = "q8_KV";
  EXPECT_FALSE(plan_memory(m, s, {}).ok());
  EXPECT_TRUE(plan_memory(m, s, {.fork = Fork::kIk}).ok());

  gguf::SynthSpec odd = *gguf::synth_defaults("qwen3");
  odd.head_dim = 48;
  odd.n_embd = 192;
  auto om = testing::describe_synth(odd);
  ASSERT_TRUE(om.ok()) << om.error().message();
  ServerSettings q = with(4096, 1);
  q.cache_type_k = "q4_0";
  auto bad = plan_memory(*om, q, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("does not divide the head size 48"), std::string::npos);
}

TEST(MemoryModel, IkQ8KvRowMetadata) {
  ModelDescriptor m = synth("qwen3");  // 4 layers × 2 KV heads × 32
  ServerSettings s = with(4096, 1);
  s.cache_type_k = "q8_KV";
  s.cache_type_v = "f16";
  auto p = plan_memory(m, s, {.fork = Fork::kIk});
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_EQ(p->caches[0].k_bytes, 4ULL * 2 * 4096 * (32 + 8));
}

TEST(MemoryModel, IkPadsTo32WithoutFlashAttention) {
  ModelDescriptor m = synth("qwen3");
  ServerSettings s = with(1000, 1);
  s.flash_attn = FlashAttn::kOff;
  EXPECT_EQ(plan_memory(m, s, {.fork = Fork::kIk})->n_ctx, 1024u);
  s.ctx = 1010;
  EXPECT_EQ(plan_memory(m, s, {.fork = Fork::kIk})->n_ctx, 1024u);
  s.ctx = 1030;
  EXPECT_EQ(plan_memory(m, s, {.fork = Fork::kIk})->n_ctx, 1056u);
  EXPECT_EQ(plan_memory(m, s, {})->n_ctx, 1280u);
}

// DeepSeek-V3-shaped MLA GGUF: 61 layers, kv_lora_rank 512 + 64 rope dims.
ModelDescriptor deepseek_v3() {
  auto m = MetaModel("deepseek2")
               .u32("block_count", 61)
               .u32("embedding_length", 7168)
               .u32("attention.head_count", 128)
               .u32("attention.head_count_kv", 1)
               .u32("attention.key_length", 576)
               .u32("attention.value_length", 512)
               .u32("attention.key_length_mla", 192)
               .u32("attention.value_length_mla", 128)
               .u32("attention.kv_lora_rank", 512)
               .u32("rope.dimension_count", 64)
               .u32("context_length", 163840)
               .describe();
  EXPECT_TRUE(m.ok()) << m.error().message();
  return *m;
}

TEST(MemoryModel, MlaMainlineIsVless) {
  ModelDescriptor m = deepseek_v3();
  ServerSettings s = with(32768, 1);
  s.cache_type_k = s.cache_type_v = "q8_0";
  auto p = plan_memory(m, s, {});
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_EQ(p->caches[0].v_bytes, 0u);
  EXPECT_EQ(p->caches[0].k_bytes, 61ULL * 32768 * 576 / 32 * 34);
  s.cache_type_v = "f16";
  EXPECT_FALSE(plan_memory(m, s, {}).ok()) << "MLA needs K and V of one type";
}

TEST(MemoryModel, IkMlaModes) {
  ModelDescriptor m = deepseek_v3();
  ServerSettings s = with(32768, 1);
  s.cache_type_k = "q8_0";
  s.cache_type_v = "f16";
  const uint64_t cells = 32768;
  auto mode3 = plan_memory(m, s, {.fork = Fork::kIk});  // default -mla 3, FA on
  ASSERT_TRUE(mode3.ok()) << mode3.error().message();
  EXPECT_EQ(mode3->ik_mla->mode, 3);
  EXPECT_EQ(mode3->ik_mla->ckv_type, "q8_0");
  EXPECT_EQ(mode3->kv_bytes(), 61 * cells * 576 / 32 * 34);
  s.flash_attn = FlashAttn::kOff;
  auto mode3_nofa = plan_memory(m, s, {.fork = Fork::kIk});
  EXPECT_EQ(mode3_nofa->ik_mla->ckv_type, "f16") << "without FA, c^KV uses the V type";
  EXPECT_EQ(mode3_nofa->kv_bytes(), 61 * cells * 576 * 2);
  s.mla = 1;
  auto mode1 = plan_memory(m, s, {.fork = Fork::kIk});
  EXPECT_EQ(mode1->ik_mla->kvt_type, "f16");
  EXPECT_EQ(mode1->kv_bytes(), 61 * cells * (576 / 32 * 34 + 512 * 2));
  s.mla = 0;
  auto mode0 = plan_memory(m, s, {.fork = Fork::kIk});
  EXPECT_EQ(mode0->kv_bytes(), 61 * cells * 128 * (192 / 32 * 34 + 128 * 2));
  s.n_gpu_layers = 10;  // partial offload forces mode 3
  EXPECT_EQ(plan_memory(m, s, {.fork = Fork::kIk})->ik_mla->mode, 3);
}

TEST(MemoryModel, WeightsByGpuLayers) {
  ModelDescriptor m = synth("qwen3");  // 4 blocks, tied output
  uint64_t blocks = 0;
  for (const auto& l : m.layers) blocks += l.weight_bytes;
  ServerSettings s = with(4096, 1);
  s.n_gpu_layers = 0;
  auto cpu = plan_memory(m, s, {});
  EXPECT_EQ(cpu->weights_device, 0u);
  EXPECT_EQ(cpu->weights_host, m.tensor_bytes);
  EXPECT_EQ(cpu->compute_device, 0u);
  s.n_gpu_layers = -1;
  auto all = plan_memory(m, s, {});
  EXPECT_EQ(all->offloaded_layers, 5u);
  EXPECT_EQ(all->offloadable_layers, 5u);
  EXPECT_EQ(all->weights_device, blocks + m.output_bytes + m.token_embd_bytes) << "tied output copied to the GPU";
  EXPECT_EQ(all->weights_host, m.token_embd_bytes);
  EXPECT_EQ(all->kv_device_bytes(), all->kv_bytes());
  s.n_gpu_layers = 1;  // only the output layer
  auto out_only = plan_memory(m, s, {});
  EXPECT_EQ(out_only->weights_device, m.output_bytes + m.token_embd_bytes);
  EXPECT_EQ(out_only->kv_device_bytes(), 0u);
  s.n_gpu_layers = 3;  // output + blocks 2, 3
  auto part = plan_memory(m, s, {});
  EXPECT_EQ(part->weights_device, m.layers[2].weight_bytes + m.layers[3].weight_bytes + m.output_bytes +
                                      m.token_embd_bytes);
  EXPECT_EQ(part->kv_device_bytes(), part->kv_bytes() / 2);
  auto no_gpu = plan_memory(m, s, {.has_accelerator = false});
  EXPECT_EQ(no_gpu->weights_device, 0u);
}

TEST(MemoryModel, HostSideComponents) {
  ModelDescriptor m = synth("qwen35");
  ServerSettings s = with(8192, 2);
  auto p = plan_memory(m, s, {});
  EXPECT_EQ(p->output_host, uint64_t{m.n_vocab} * 2 * 4);
  EXPECT_EQ(p->prompt_cache_host, 8192ULL << 20) << "--cache-ram defaults to 8192 MiB";
  // Checkpoints of one sequence's recurrent state, at most one per 8192 tokens of a slot
  // (4096 tokens per slot here: one), at most --ctx-checkpoints.
  EXPECT_EQ(p->checkpoints_host, 1ULL * 2 * (p->recurrent->bytes() / 2));
  s.ctx = 262144;
  EXPECT_EQ(plan_memory(m, s, {})->checkpoints_host, 17ULL * 2 * (p->recurrent->bytes() / 2));
  EXPECT_EQ(plan_memory(m, s, {.fork = Fork::kIk})->checkpoints_host, 32ULL * 2 * (p->recurrent->bytes() / 2));
  s.cache_ram_mib = 0;
  s.ctx_checkpoints = 4;
  auto q = plan_memory(m, s, {});
  EXPECT_EQ(q->prompt_cache_host, 0u);
  EXPECT_EQ(q->checkpoints_host, 4ULL * 2 * (q->recurrent->bytes() / 2));
  EXPECT_EQ(q->total(), q->device_total() + q->host_total() + q->reserve);
  EXPECT_EQ(plan_memory(synth("qwen3"), s, {})->checkpoints_host, 0u) << "dense models truncate instead";
}

TEST(MemoryModel, SlotCappedAtTrainingContext) {
  gguf::SynthSpec spec = *gguf::synth_defaults("qwen3");
  spec.ctx_train = 4096;
  auto m = testing::describe_synth(spec);
  auto p = plan_memory(*m, with(8192, 1), {});
  EXPECT_EQ(p->n_ctx_seq, 8192u);
  EXPECT_EQ(p->n_ctx_slot, 4096u);
  EXPECT_TRUE(p->slot_capped_by_train);
  auto ik = plan_memory(*m, with(8192, 2), {.fork = Fork::kIk});
  EXPECT_EQ(ik->n_ctx_slot, 4096u) << "ik: n_ctx / slots, no cap";
  EXPECT_FALSE(ik->slot_capped_by_train);
}

TEST(MemoryModel, UnknownArchitectureIsAnEstimate) {
  auto m = MetaModel("someday-lm")
               .u32("block_count", 2)
               .u32("embedding_length", 256)
               .u32("attention.head_count", 8)
               .u32("attention.head_count_kv", 2)
               .describe();
  auto p = plan_memory(*m, with(4096, 1), {});
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->estimate);
  EXPECT_EQ(p->kv_bytes(), 2ULL * 2 * 32 * 2 * 2 * 4096);
}

}  // namespace
}  // namespace kvgate::plan
