// The startup-log parser on logs recorded from a real ik_llama.cpp build
// (tests/fixtures/ik/, scripts/record-ik-fixtures.sh): starts that became ready, captured with
// stdout and stderr together and with stderr only, and starts that crashed. Expected figures
// are the ones those logs print.
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "engine/startup_log.h"
#include "testing/paths.h"

namespace kvgate::engine {
namespace {

std::string ik_fixture(const std::string& name) {
  std::ifstream in(std::string(kvgate::testing::source_dir()) + "/tests/fixtures/ik/" + name);
  EXPECT_TRUE(in.good()) << name;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> ik_lines(const std::string& name) {
  std::vector<std::string> out;
  std::istringstream in(ik_fixture(name));
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

struct Recorded {
  const char* kind;
  double weights_mib;
  double kv_mib;     // KV self size
  double kv_buffer;  // the KV buffer (the hybrid's holds its recurrent state too)
};

constexpr Recorded kRecorded[] = {
    {"llama", 38.22, 8.00, 8.00},
    {"qwen3", 38.22, 8.00, 8.00},
    {"qwen35", 39.89, 8.00, 8.11},
    {"gemma3", 38.79, 12.00, 12.00},
};

void expect_ik_allocation(const StartupFacts& f, const Recorded& r, const std::string& name) {
  SCOPED_TRACE(name);
  EXPECT_EQ(f.fork, plan::Fork::kIk);
  EXPECT_EQ(f.n_ctx, 8192u);
  EXPECT_EQ(f.n_ubatch, 512u);
  EXPECT_EQ(f.flash_attn, true);
  EXPECT_EQ(f.n_ctx_train, 131072u);
  ASSERT_TRUE(f.kv_self);
  EXPECT_DOUBLE_EQ(f.kv_self->mib, r.kv_mib);
  EXPECT_EQ(f.kv_self->type_k, "f16");
  EXPECT_EQ(f.kv_self->type_v, "f16");
  EXPECT_DOUBLE_EQ(f.kv_self->k_mib, r.kv_mib / 2);
  EXPECT_TRUE(f.kv_caches.empty()) << "ik has no llama_kv_cache: lines";
  ASSERT_EQ(f.kv_buffers.size(), 1u);
  EXPECT_EQ(f.kv_buffers[0].device, "CPU");
  EXPECT_DOUBLE_EQ(f.kv_buffers[0].mib, r.kv_buffer);
  ASSERT_EQ(f.model_buffers.size(), 1u);
  EXPECT_EQ(f.model_buffers[0].device, "CPU");
  EXPECT_DOUBLE_EQ(f.model_buffers[0].mib, r.weights_mib);
  ASSERT_EQ(f.compute_buffers.size(), 1u);
  EXPECT_DOUBLE_EQ(f.compute_buffers[0].mib, 297.00);
  ASSERT_EQ(f.output_buffers.size(), 1u);
  EXPECT_DOUBLE_EQ(f.output_buffers[0].mib, 0.58);
  EXPECT_FALSE(f.offloaded) << "a CPU build prints no offload line";
  EXPECT_TRUE(f.errors.empty()) << f.errors.front();
  EXPECT_FALSE(f.crashed);
}

TEST(IkStartupLog, EveryModelKindWithStdoutAndStderr) {
  for (const Recorded& r : kRecorded) {
    const std::string name = std::string("startup-") + r.kind + ".log";
    const StartupFacts f = parse_startup_log(ik_fixture(name));
    expect_ik_allocation(f, r, name);
    EXPECT_EQ(f.n_slots, 1u) << name;
    EXPECT_EQ(f.n_ctx_slot, 8192u) << name;
    EXPECT_TRUE(f.model_loaded) << name;
    EXPECT_TRUE(f.listening) << name;
  }
}

// ik prints mainline's `print_info:`, `srv  init:` lines on stderr too, before any line only
// ik prints; the stdout lines (`INFO [ … ]`) are not there.
TEST(IkStartupLog, StderrOnlyIsStillIk) {
  for (const Recorded& r : kRecorded) {
    const std::string name = std::string("startup-") + r.kind + ".stderr.log";
    const StartupFacts f = parse_startup_log(ik_fixture(name));
    expect_ik_allocation(f, r, name);
    EXPECT_FALSE(f.n_slots) << name;
    EXPECT_FALSE(f.listening) << name;
  }
}

TEST(IkStartupLog, ForkIsIkAtTheFirstIkLineFedOneByOne) {
  StartupLogParser p;
  bool saw_mainline_guess = false;
  for (const auto& line : ik_lines("startup-qwen3.stderr.log")) {
    p.feed(line);
    saw_mainline_guess = saw_mainline_guess || p.facts().fork == plan::Fork::kMainline;
    if (line.find("HAVE_FANCY_SIMD") != std::string::npos) {
      EXPECT_EQ(p.facts().fork, plan::Fork::kIk);
    }
  }
  EXPECT_TRUE(saw_mainline_guess) << "print_info: comes first: the guess is corrected, not avoided";
  EXPECT_EQ(p.facts().fork, plan::Fork::kIk);
}

TEST(IkStartupLog, UnsupportedCacheCombinationCrash) {
  const StartupFacts f = parse_startup_log(ik_fixture("crash-bf16.log"));
  EXPECT_EQ(f.fork, plan::Fork::kIk);
  EXPECT_TRUE(f.crashed);
  ASSERT_TRUE(f.kv_self) << "the cache was allocated before the first graph ran";
  EXPECT_EQ(f.kv_self->type_k, "bf16");
  EXPECT_EQ(f.errors, (std::vector<std::string>{
                          "K cache bf16 coupled with V cache bf16 is not a supported combination on the "
                          "CPU backend. Supported types are: iq4_nl, q4_0, q4_1, q6_0, q8_KV, q8_0, f16",
                          "/tmp/ik/src/ggml/src/iqk/iqk_flash_attn.cpp:314: Fatal error"}));
}

TEST(IkStartupLog, QuantizedVWithoutFlashAttentionFailsToLoad) {
  const StartupFacts f = parse_startup_log(ik_fixture("crash-f32-no-fa.log"));
  EXPECT_EQ(f.fork, plan::Fork::kIk);
  EXPECT_FALSE(f.crashed) << "it exits 1";
  EXPECT_FALSE(f.model_loaded);
  ASSERT_EQ(f.errors.size(), 3u);
  EXPECT_EQ(f.errors[0], "llama_init_from_model: V cache quantization requires flash_attn");
  EXPECT_EQ(f.errors[1],
            "llama_init_from_gpt_params: error: failed to create context with model 'tiny-qwen3.gguf'");
  EXPECT_EQ(f.errors[2].rfind("ERR [              load_model] unable to load model", 0), 0u) << f.errors[2];
}

TEST(IkStartupLog, AssertCrash) {
  const StartupFacts f = parse_startup_log(ik_fixture("crash-q8_KV.log"));
  EXPECT_TRUE(f.crashed);
  ASSERT_EQ(f.errors.size(), 1u);
  EXPECT_EQ(f.errors[0].rfind("/tmp/ik/src/ggml/src/ggml.c:5427: GGML_ASSERT(view_src == NULL", 0), 0u)
      << f.errors[0];
}

TEST(IkStartupLog, StartFailureNamesTheEngineErrorNotTheCrashHandler) {
  const auto lines = ik_lines("crash-bf16.log");
  ASSERT_EQ(lines.back().rfind("[Inferior 1 (process ", 0), 0u) << "the recorded log ends in gdb's output";
  const StartFailure failure = explain_start_failure(lines);
  EXPECT_TRUE(failure.crashed);
  ASSERT_EQ(failure.cause.size(), 2u);
  EXPECT_NE(failure.cause[0].find("is not a supported combination on the CPU backend"), std::string::npos);
  ASSERT_FALSE(failure.last_lines.empty());
  for (const auto& l : failure.last_lines) {
    EXPECT_NE(l.front(), '#') << l;
    EXPECT_EQ(l.find("Inferior"), std::string::npos) << l;
    EXPECT_EQ(l.find("libthread_db"), std::string::npos) << l;
    EXPECT_EQ(l.find("No such file or directory"), std::string::npos) << l;
  }
  EXPECT_EQ(failure.last_lines.back(), "/tmp/ik/src/ggml/src/iqk/iqk_flash_attn.cpp:314: Fatal error");
  const std::string text = describe_start_failure(failure);
  EXPECT_EQ(
      text.rfind("; it said:\n  | K cache bf16 coupled with V cache bf16 is not a supported combination", 0),
      0u)
      << text;
  EXPECT_EQ(text.find("Inferior"), std::string::npos) << text;

  const StartFailure assert_failure = explain_start_failure(ik_lines("crash-q8_KV.log"));
  ASSERT_EQ(assert_failure.cause.size(), 1u);
  EXPECT_NE(assert_failure.cause[0].find("GGML_ASSERT"), std::string::npos);
}

TEST(IkStartupLog, StartFailureWithoutErrorLinesShowsTheLastLines) {
  auto lines = ik_lines("startup-qwen3.log");
  lines.resize(60);  // cut short during model loading: no line says why
  const StartFailure failure = explain_start_failure(lines, 5);
  EXPECT_TRUE(failure.cause.empty());
  EXPECT_FALSE(failure.crashed);
  ASSERT_EQ(failure.last_lines.size(), 5u);
  EXPECT_EQ(failure.last_lines.front(), "llm_load_print_meta: f_norm_eps       = 0.0e+00");
  EXPECT_EQ(failure.last_lines.back(), "llm_load_print_meta: f_logit_scale    = 0.0e+00");
  const std::string text = describe_start_failure(failure);
  EXPECT_EQ(text.rfind("; its last lines:\n  | ", 0), 0u) << text;
}

}  // namespace
}  // namespace kvgate::engine
