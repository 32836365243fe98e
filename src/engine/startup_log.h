// StartupFacts: what a llama-server startup log says the engine really allocated, parsed from
// the log lines of mainline llama.cpp (its libllama lines appear only at `-lv 4` since
// ~b9181) and of ik_llama.cpp, including the older prefixes of both (llama_kv_cache_unified,
// llama_kv_cache_init, llama_new_context_with_model, llm_load_tensors).
//
// Recognised (reference/server_behaviour.md §2, kv_estimation.md §5):
//   context   `llama_context: n_ctx = …` (n_seq_max, n_ctx, n_ctx_seq, n_batch, n_ubatch,
//             flash_attn, kv_unified), ik `llama_init_from_model: …` (also mla_attn);
//             `n_ctx_seq (A) > n_ctx_train (B)`; `print_info: n_ctx_train = …`
//   KV        every `llama_kv_cache: size = … (C cells, L layers, S/T seqs), K (t): …, V (t): …`
//             with its role taken from the `creating non-SWA / SWA / main / indexer KV cache`
//             line before it; `… KV buffer size = …` per device; ik `KV self size = …` (incl.
//             the MLA `c^KV` forms) and `KV self indexer size`
//   recurrent `llama_memory_recurrent: size = …` (with or without rs_seq and P) and RS buffers
//   weights   `offloaded N/M layers to GPU`, `<dev> model buffer size = …` (ik: `<dev> buffer size`)
//   compute   `<dev> compute buffer size = …`, `<dev> output buffer size = …`
//   slots     `initializing, n_slots = N, n_ctx_slot = C, …`, the capped-by-training-context
//             warning, `new slot, n_ctx = …`, ik `initializing slots | n_slots=N` and
//             `new slot | … n_ctx_slot=C`
//   outcome   `model loaded` / `listening on`; error lines (level E, ik's `ERR [`, `error:`,
//             `failed to`, ggml's `Fatal error` and GGML_ASSERT, ik's "not a supported
//             combination" and "… requires …" context errors); a crash (ggml abort,
//             uncaught exception, crash-handler backtrace)
//   fork      lines only ik prints (`INFO [`, its SIMD banner, its context settings such as
//             `attn_max_b`) make the log ik's wherever they come; mainline's lines, some of
//             which ik prints too (`print_info:`, `srv  `, `slot `), name mainline until then
// Lines are accepted with or without mainline's `0.00.701.029 I ` prefix and with trailing
// CR/LF. Unrecognised lines are ignored; no input can make the parser fail or crash, a
// malformed line is simply not recognised.
//
// StartupLogParser consumes lines one at a time (a supervisor feeds the live log); facts()
// is valid at any point. Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "plan/memory_model.h"
#include "plan/server_settings.h"
#include "util/result.h"

namespace kvgate::engine {

struct BufferFact {
  std::string device;  // "CPU", "CUDA0", "CPU_Mapped", "CUDA_Host", …
  double mib = 0;
};

struct KvCacheFact {
  plan::CacheRole role = plan::CacheRole::kMain;
  std::optional<uint32_t> announced_cells;  // from the `creating … KV cache, size = N cells` line
  double mib = 0;
  uint32_t cells = 0;    // per stream
  uint32_t layers = 0;
  uint32_t seqs = 0;
  uint32_t streams = 1;
  std::string type_k;
  double k_mib = 0;
  std::string type_v;
  double v_mib = 0;
  size_t line = 0;       // 1-based line number
};

struct RecurrentFact {
  double mib = 0;
  uint32_t cells = 0;
  uint32_t layers = 0;
  uint32_t seqs = 0;
  uint32_t rs_seq = 0;
  std::string type_r;
  double r_mib = 0;
  std::string type_s;
  double s_mib = 0;
  double p_mib = 0;
};

// ik_llama.cpp's (and old mainline's) `KV self size` line.
struct KvSelfFact {
  double mib = 0;
  bool mla = false;       // the c^KV form
  std::string type_k;     // K, or c^KV
  double k_mib = 0;
  std::string type_v;     // V, or kv^T ("" when "not used")
  double v_mib = 0;
};

struct StartupFacts {
  std::optional<plan::Fork> fork;  // from markers only one fork prints
  std::optional<uint32_t> verbosity;  // mainline's `verbosity = N (adjust with the -lv N …)`

  std::optional<uint32_t> n_ctx_train;
  std::optional<uint32_t> n_seq_max;
  std::optional<uint32_t> n_ctx;
  std::optional<uint32_t> n_ctx_seq;
  std::optional<uint32_t> n_batch;
  std::optional<uint32_t> n_ubatch;
  std::optional<std::string> flash_attn_setting;  // as printed: "auto", "enabled", "1", …
  std::optional<bool> flash_attn;                 // resolved, when the log says
  std::optional<bool> kv_unified;
  std::optional<int32_t> mla_attn;                // ik
  std::optional<std::pair<uint32_t, uint32_t>> ctx_seq_over_train;  // n_ctx_seq, n_ctx_train

  std::optional<uint32_t> n_slots;
  std::optional<uint32_t> n_ctx_slot;
  std::optional<std::pair<uint32_t, uint32_t>> slot_capped;  // requested, training context

  std::vector<KvCacheFact> kv_caches;
  std::vector<BufferFact> kv_buffers;
  std::optional<RecurrentFact> recurrent;
  std::vector<BufferFact> rs_buffers;
  std::optional<KvSelfFact> kv_self;
  std::optional<double> kv_self_indexer_mib;

  std::optional<std::pair<uint32_t, uint32_t>> offloaded;  // N/M
  std::vector<BufferFact> model_buffers;
  std::vector<BufferFact> output_buffers;
  std::vector<BufferFact> compute_buffers;

  // The engine's error lines (at most 20, a line repeated at once kept once), never a crash
  // handler's output; ik's list of supported cache types joins the error it explains.
  std::vector<std::string> errors;
  // The log shows the engine dying: ggml's `Fatal error` or a failed GGML_ASSERT, an uncaught
  // exception, or a crash handler's backtrace (`[Inferior 1 (process N) detached]`).
  bool crashed = false;
  bool model_loaded = false;
  bool listening = false;

  size_t lines = 0;
  size_t recognised = 0;   // lines that carried a fact or a fork marker
  bool llama_markers = false;  // lines only a llama.cpp-family server prints

  // True when the log holds allocation facts (context, KV, buffers).
  bool has_allocation_facts() const;
  const KvCacheFact* kv_cache(plan::CacheRole role) const;
};

class StartupLogParser {
 public:
  void feed(std::string_view line);
  const StartupFacts& facts() const { return facts_; }

 private:
  StartupFacts facts_;
  std::optional<std::pair<plan::CacheRole, uint32_t>> announced_;  // pending cache role + cells
  bool list_open_ = false;  // the last error line announced a list of supported types
};

// Parses a whole log (lines separated by \n).
StartupFacts parse_startup_log(std::string_view text);

// Why a start failed, from the engine's output (oldest first).
struct StartFailure {
  std::vector<std::string> cause;       // the engine's own error lines (StartupFacts::errors)
  std::vector<std::string> last_lines;  // the last `tail` lines, crash-handler output left out
  bool crashed = false;
};
StartFailure explain_start_failure(const std::vector<std::string>& lines, size_t tail = 15);
// The failure as text for a message: "; it said:" and the cause, else "; its last lines:"
// and those, each line as "\n  | LINE".
std::string describe_start_failure(const StartFailure& failure);

// Ok when the facts hold allocation lines; otherwise the error a user can act on: a mainline
// log without them was written below -lv 4; a log without any llama-server line is not one.
Status require_allocation_facts(const StartupFacts& facts);

}  // namespace kvgate::engine
