#include "engine/startup_log.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>
#include "testing/paths.h"

namespace kvgate::engine {
namespace {

std::string fixture(const std::string& name) {
  std::ifstream in(std::string(kvgate::testing::source_dir()) + "/tests/fixtures/logs/" + name);
  EXPECT_TRUE(in.good()) << name;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(StartupLog, PinnedEngineAtVerbosity4) {
  StartupFacts f = parse_startup_log(fixture("pinned_qwen35_np2_q8_0_lv4.log"));
  EXPECT_EQ(f.fork, plan::Fork::kMainline);
  EXPECT_EQ(f.verbosity, 4u);
  EXPECT_EQ(f.n_ctx_train, 131072u);
  EXPECT_EQ(f.n_seq_max, 2u);
  EXPECT_EQ(f.n_ctx, 4096u);
  EXPECT_EQ(f.n_ctx_seq, 2048u);
  EXPECT_EQ(f.n_ubatch, 512u);
  EXPECT_EQ(f.flash_attn, true);
  EXPECT_EQ(f.kv_unified, false);
  ASSERT_EQ(f.kv_caches.size(), 1u);
  const KvCacheFact& kv = f.kv_caches[0];
  EXPECT_EQ(kv.role, plan::CacheRole::kMain);
  EXPECT_DOUBLE_EQ(kv.mib, 2.12);
  EXPECT_EQ(kv.cells, 2048u);
  EXPECT_EQ(kv.layers, 2u);
  EXPECT_EQ(kv.seqs, 2u);
  EXPECT_EQ(kv.streams, 2u);
  EXPECT_EQ(kv.type_k, "q8_0");
  EXPECT_EQ(kv.type_v, "q8_0");
  EXPECT_DOUBLE_EQ(kv.k_mib, 1.06);
  ASSERT_EQ(f.kv_buffers.size(), 1u);
  EXPECT_EQ(f.kv_buffers[0].device, "CPU");
  ASSERT_TRUE(f.recurrent);
  EXPECT_DOUBLE_EQ(f.recurrent->mib, 0.22);
  EXPECT_EQ(f.recurrent->cells, 2u);
  EXPECT_EQ(f.recurrent->layers, 8u);
  EXPECT_EQ(f.recurrent->rs_seq, 0u);
  EXPECT_DOUBLE_EQ(f.recurrent->s_mib, 0.19);
  ASSERT_EQ(f.compute_buffers.size(), 1u);
  EXPECT_DOUBLE_EQ(f.compute_buffers[0].mib, 4.80);
  ASSERT_EQ(f.output_buffers.size(), 1u);
  EXPECT_DOUBLE_EQ(f.output_buffers[0].mib, 1.16);
  ASSERT_EQ(f.model_buffers.size(), 1u);
  EXPECT_EQ(f.model_buffers[0].device, "CPU_Mapped");
  EXPECT_EQ(f.n_slots, 2u);
  EXPECT_EQ(f.n_ctx_slot, 2048u);
  EXPECT_FALSE(f.offloaded) << "a CPU-only build prints no offload line";
  EXPECT_TRUE(f.model_loaded);
  EXPECT_TRUE(f.listening);
  EXPECT_TRUE(f.errors.empty());
  EXPECT_TRUE(require_allocation_facts(f).ok());
}

TEST(StartupLog, DefaultVerbosityHasNoAllocationLines) {
  StartupFacts f = parse_startup_log(fixture("pinned_qwen35_np2_lv3.log"));
  EXPECT_EQ(f.fork, plan::Fork::kMainline);
  EXPECT_EQ(f.verbosity, 3u);
  EXPECT_EQ(f.n_slots, 2u) << "the server's own lines are visible at level 3";
  EXPECT_FALSE(f.has_allocation_facts());
  auto st = require_allocation_facts(f);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("-lv 4"), std::string::npos) << st.error().message();
  EXPECT_NE(st.error().message().find("verbosity 3"), std::string::npos);
}

TEST(StartupLog, NotAServerLog) {
  StartupFacts f = parse_startup_log(fixture("not_a_server_log.txt"));
  EXPECT_FALSE(f.fork);
  auto st = require_allocation_facts(f);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("not a llama-server startup log"), std::string::npos);
  EXPECT_FALSE(require_allocation_facts(parse_startup_log("")).ok());
}

TEST(StartupLog, MainlineCudaOffloadAndBuffers) {
  StartupFacts f = parse_startup_log(fixture("mainline_qwen35_27b_cuda.log"));
  ASSERT_TRUE(f.offloaded);
  EXPECT_EQ(f.offloaded->first, 65u);
  EXPECT_EQ(f.offloaded->second, 65u);
  ASSERT_EQ(f.model_buffers.size(), 2u);
  EXPECT_EQ(f.model_buffers[0].device, "CUDA0");
  EXPECT_DOUBLE_EQ(f.model_buffers[1].mib, 682.03);
  ASSERT_EQ(f.compute_buffers.size(), 2u);
  EXPECT_EQ(f.compute_buffers[1].device, "CUDA_Host");
  EXPECT_EQ(f.flash_attn_setting, "auto");
  EXPECT_EQ(f.flash_attn, true) << "resolved by the `Flash Attention enabled` line";
  EXPECT_EQ(f.kv_unified, true);
  EXPECT_EQ(f.kv_caches.at(0).seqs, 4u);
  EXPECT_EQ(f.kv_caches.at(0).streams, 1u);
  EXPECT_DOUBLE_EQ(f.recurrent->r_mib, 22.50);
}

TEST(StartupLog, BothSlidingWindowCaches) {
  StartupFacts f = parse_startup_log(fixture("mainline_gemma3_27b_mismatch.log"));
  ASSERT_EQ(f.kv_caches.size(), 2u);
  const KvCacheFact* base = f.kv_cache(plan::CacheRole::kMain);
  const KvCacheFact* swa = f.kv_cache(plan::CacheRole::kSwa);
  ASSERT_TRUE(base && swa);
  EXPECT_EQ(base->announced_cells, 16384u);
  EXPECT_EQ(base->layers, 10u);
  EXPECT_EQ(swa->announced_cells, 1536u);
  EXPECT_EQ(swa->cells, 1536u);
  EXPECT_DOUBLE_EQ(swa->mib, 175.50);
  EXPECT_EQ(f.kv_buffers.size(), 4u);
  EXPECT_EQ(f.offloaded, std::make_pair(50u, 63u));
}

TEST(StartupLog, CappedByTrainingContext) {
  StartupFacts f = parse_startup_log(fixture("mainline_capped_by_training_context.log"));
  EXPECT_EQ(f.slot_capped, std::make_pair(65536u, 32768u));
  EXPECT_EQ(f.ctx_seq_over_train, std::make_pair(65536u, 32768u));
  EXPECT_EQ(f.n_ctx_slot, 32768u);
}

TEST(StartupLog, OlderMainlinePrefixes) {
  StartupFacts f = parse_startup_log(fixture("mainline_older_builds.log"));
  ASSERT_EQ(f.kv_caches.size(), 1u);
  EXPECT_EQ(f.kv_caches[0].seqs, 1u);
  EXPECT_EQ(f.kv_caches[0].streams, 1u);
  EXPECT_DOUBLE_EQ(f.kv_caches[0].mib, 1024.0);
  ASSERT_TRUE(f.recurrent);
  EXPECT_DOUBLE_EQ(f.recurrent->s_mib, 12.0);
  EXPECT_EQ(f.recurrent->rs_seq, 0u);
  EXPECT_EQ(f.compute_buffers.size(), 2u);
  EXPECT_EQ(f.flash_attn, false);
  EXPECT_EQ(f.n_ctx, 8192u);
  EXPECT_EQ(f.n_ctx_train, 131072u);
}

TEST(StartupLog, LoadError) {
  StartupFacts f = parse_startup_log(fixture("mainline_load_error.log"));
  EXPECT_GE(f.errors.size(), 3u);
  EXPECT_NE(f.errors[0].find("error loading model"), std::string::npos);
  EXPECT_FALSE(f.model_loaded);
}

TEST(StartupLog, IkFormat) {
  StartupFacts f = parse_startup_log(fixture("ik_qwen3_235b.log"));
  EXPECT_EQ(f.fork, plan::Fork::kIk);
  EXPECT_EQ(f.n_ctx_train, 40960u);
  EXPECT_EQ(f.n_ctx, 32768u);
  EXPECT_EQ(f.flash_attn, true);
  ASSERT_TRUE(f.kv_self);
  EXPECT_FALSE(f.kv_self->mla);
  EXPECT_DOUBLE_EQ(f.kv_self->mib, 3196.0);
  EXPECT_EQ(f.kv_self->type_k, "q8_0");
  EXPECT_DOUBLE_EQ(f.kv_self->v_mib, 1598.0);
  EXPECT_TRUE(f.kv_caches.empty());
  ASSERT_EQ(f.kv_buffers.size(), 1u);
  EXPECT_EQ(f.kv_buffers[0].device, "CUDA0");
  ASSERT_EQ(f.model_buffers.size(), 2u);
  EXPECT_EQ(f.model_buffers[0].device, "CPU");
  EXPECT_EQ(f.offloaded, std::make_pair(95u, 95u));
  ASSERT_EQ(f.compute_buffers.size(), 2u);
  EXPECT_DOUBLE_EQ(f.compute_buffers[0].mib, 312.75);
  EXPECT_EQ(f.n_slots, 1u);
  EXPECT_EQ(f.n_ctx_slot, 32768u);
  EXPECT_TRUE(f.model_loaded);
  EXPECT_TRUE(f.listening);
}

TEST(StartupLog, IkMlaAndOlderPrefix) {
  StartupFacts mla = parse_startup_log(fixture("ik_deepseek_v3_mla.log"));
  ASSERT_TRUE(mla.kv_self);
  EXPECT_TRUE(mla.kv_self->mla);
  EXPECT_EQ(mla.kv_self->type_k, "q8_0");
  EXPECT_EQ(mla.kv_self->type_v, "");
  EXPECT_EQ(mla.mla_attn, 3);
  StartupFacts old = parse_startup_log(fixture("ik_older_prefix.log"));
  ASSERT_TRUE(old.kv_self);
  EXPECT_DOUBLE_EQ(old.kv_self->k_mib, 68.0);
  EXPECT_EQ(old.kv_self->type_v, "iq4_nl");
  EXPECT_DOUBLE_EQ(old.kv_self->v_mib, 36.0);
  EXPECT_EQ(old.n_ctx, 2048u);
  EXPECT_EQ(old.compute_buffers.size(), 2u);
}

TEST(StartupLog, CarriageReturnsColoursAndNoPrefix) {
  StartupLogParser p;
  p.feed("llama_kv_cache: size =   64.00 MiB (   512 cells,  32 layers,  1/1 seqs), K (f16):   32.00 MiB, V (f16):   32.00 MiB\r");
  p.feed("\x1b[32m0.00.1 I llama_context: n_ctx = 512\x1b[0m");
  ASSERT_EQ(p.facts().kv_caches.size(), 1u);
  EXPECT_EQ(p.facts().kv_caches[0].cells, 512u);
  EXPECT_EQ(p.facts().n_ctx, 512u);
}

TEST(StartupLog, MalformedLinesAreIgnored) {
  const std::vector<std::string> bad = {
      "llama_kv_cache: size = ",
      "llama_kv_cache: size = 12.00 MiB (",
      "llama_kv_cache: size = -5 MiB (1 cells, 1 layers, 1/1 seqs), K (f16): 1 MiB, V (f16): 1 MiB",
      "llama_kv_cache: size = 1e400 MiB (1 cells, 1 layers, 1/1 seqs), K (f16): 1 MiB, V (f16): 1 MiB",
      "llama_kv_cache: size = 1.00 MiB (99999999999 cells, 1 layers, 1/1 seqs), K (f16): 1 MiB, V (f16): 1 MiB",
      "llama_kv_cache: size = 1.00 MiB (1 cells, 1 layers, 1/1 seqs), K (f16: 1 MiB, V (f16): 1 MiB",
      "load_tensors: offloaded 4294967296/1 layers to GPU",
      "load_tensors: offloaded /5 layers to GPU",
      "llama_context: n_ctx =",
      "llama_context: n_ctx = abc",
      "sched_reserve: compute buffer size = MiB",
      " buffer size = 1 MiB",
      "srv    load_model: initializing, n_slots = ",
      "the slot context (",
      "INFO [ init] new slot | n_ctx_slot=",
      "llama_memory_recurrent: size = 1.00 MiB (1 cells, 2 layers, 3 seqs 4 rs_seq), R (f32",
      "llama_init_from_model: KV self size  = 1.00 MiB, c^KV (",
      std::string(100000, 'x'),
      std::string("llama_kv_cache: size = 1.00 MiB\0 (1 cells", 41),
      "\x1b[",
      "0.00.1 E",
  };
  StartupLogParser p;
  for (const auto& line : bad) p.feed(line);
  const StartupFacts& f = p.facts();
  EXPECT_TRUE(f.kv_caches.empty());
  EXPECT_FALSE(f.offloaded);
  EXPECT_FALSE(f.n_ctx);
  EXPECT_FALSE(f.recurrent);
  EXPECT_FALSE(f.kv_self);
  EXPECT_EQ(f.lines, bad.size());
}

// Every prefix of every fixture line, and lines with random bytes changed: nothing crashes
// (the suite also runs under ASan/UBSan with -DKVGATE_SANITIZE=ON).
TEST(StartupLog, EveryTruncationAndCorruption) {
  std::mt19937 rng(7);
  for (const char* name : {"pinned_qwen35_np2_q8_0_lv4.log", "mainline_gemma3_27b_mismatch.log", "ik_qwen3_235b.log",
                           "ik_deepseek_v3_mla.log", "mainline_older_builds.log"}) {
    std::istringstream in(fixture(name));
    for (std::string line; std::getline(in, line);) {
      StartupLogParser p;
      for (size_t n = 0; n <= line.size(); ++n) p.feed(std::string_view(line).substr(0, n));
      for (int round = 0; round < 20; ++round) {
        std::string corrupt = line;
        if (corrupt.empty()) break;
        corrupt[rng() % corrupt.size()] = static_cast<char>(rng() % 256);
        p.feed(corrupt);
      }
      EXPECT_LE(p.facts().kv_caches.size(), 2u * 20 + 2);
    }
  }
}

}  // namespace
}  // namespace kvgate::engine
