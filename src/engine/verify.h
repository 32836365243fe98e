// verify: the plan against what the server's startup log says it allocated.
//
// An Expectation is what kvgate planned (from a plan::MemoryPlan, or only from the settings
// when no model is at hand: context, slots, KV types). compare() turns Expectation + facts
// into named findings; any finding of severity kError means the server is not running the
// way it was planned (`kvgate doctor` exits non-zero, the supervisor applies its policy).
//
// Finding codes (stable; `doctor --json` and the supervisor key on them):
//   no_allocation_lines     the log has no context/KV lines (mainline below -lv 4, or not a
//                           llama-server log)                                      error
//   engine_crashed          the log shows the engine dying (ggml abort, failed assert,
//                           uncaught exception, crash-handler backtrace); the message
//                           quotes its error lines                                  error
//   engine_error            the engine printed errors and did not finish loading   error
//   context_smaller         n_ctx below the plan (the hint names -fit off for mainline
//                           only: ik has no -fit)                                   error
//   context_larger          n_ctx above the plan                                    warning
//   slot_context_smaller    n_ctx_seq or the slot context below the plan            error
//   slot_capped_by_training_context  the server caps each slot at n_ctx_train       warning
//   slots_mismatch          n_seq_max / n_slots differ                              error
//   kv_unified_mismatch     unified vs per-slot KV differ                           error
//   flash_attn_mismatch     flash attention resolved differently                    error
//   kv_type_mismatch        a cache's K or V type differs (e.g. q4_0 instead of q8_0) error
//   kv_cache_missing        a planned cache (base / SWA / indexer) is not in the log error
//   kv_cache_unexpected     the log has a cache the plan did not expect             warning
//   fewer_cells / more_cells  cells per stream differ                               error / warning
//   kv_layers_mismatch      the number of layers in a cache differs                 error
//   kv_smaller_than_planned / kv_larger_than_planned  MiB differ by more than 0.01   error
//   recurrent_missing / recurrent_mismatch  recurrent state absent or of another size error
//   partial_offload         fewer layers offloaded than planned                     error
//   cpu_weights_left        all layers offloaded, yet host model buffers exceed the plan
//                           (overrides such as -ot / --cpu-moe)                     warning
//   compute_above_estimate  a compute buffer exceeds the estimate by more than 15%  warning
//
// Live use (a supervisor reading the engine's output as it arrives):
//   StartupVerifier v(expectation_from_plan(plan, settings));
//   for each line: v.feed(line);              // any thread, one at a time
//   if (v.complete()) { auto f = v.findings(); ... }   // every planned fact has arrived
//   at readiness or exit: auto f = v.finish();          // also reports what never arrived
// findings() only compares facts that have arrived, so it never reports a missing line
// early; finish() adds the missing-fact findings. Not thread-safe: serialise calls.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/startup_log.h"
#include "plan/memory_model.h"
#include "plan/server_settings.h"

namespace kvgate::engine {

struct Expectation {
  plan::Fork fork = plan::Fork::kMainline;
  bool sizes_known = true;   // false: built from settings only (no model), no MiB/cells checks
  uint32_t n_ctx = 0;
  uint32_t n_ctx_seq = 0;
  uint32_t n_ctx_slot = 0;
  bool slot_capped = false;  // the plan already says the slot is capped at n_ctx_train
  uint32_t n_seq_max = 1;
  bool kv_unified = false;
  bool flash_attn = true;
  std::string type_k;
  std::string type_v;
  std::vector<plan::CacheBill> caches;
  std::optional<plan::RecurrentBill> recurrent;
  std::optional<plan::IkMlaBill> ik_mla;
  uint32_t offloaded = 0;          // expected N of "offloaded N/M"; 0: CPU only
  uint32_t offloadable = 0;        // M
  uint64_t weights_host = 0;
  uint64_t compute_estimate = 0;   // the larger of the device/host estimates
};

Expectation expectation_from_plan(const plan::MemoryPlan& plan, const plan::ServerSettings& settings);
// Without a model: context, slots, unified, flash attention and KV types only.
Expectation expectation_from_settings(const plan::ServerSettings& settings, plan::Fork fork);

enum class Severity { kError, kWarning, kInfo };
const char* severity_name(Severity s);  // "error", "warning", "info"

struct Finding {
  std::string code;
  Severity severity = Severity::kError;
  std::string message;  // what differs, with both figures, and what to do
};

struct Comparison {
  std::vector<Finding> findings;
  std::vector<std::string> verified;  // what the log confirmed, one line each
  bool has_errors() const;
};

// `final`: the log is complete, so planned facts that are absent become findings.
Comparison compare(const Expectation& expected, const StartupFacts& facts, bool final);
// Facts only (no plan): engine errors, capped slots, partial offload, missing lines.
Comparison inspect_facts(const StartupFacts& facts, bool final);

class StartupVerifier {
 public:
  explicit StartupVerifier(std::optional<Expectation> expected) : expected_(std::move(expected)) {}

  void feed(std::string_view line) { parser_.feed(line); }
  // Every fact the comparison needs has arrived (the KV lines, the recurrent line when
  // planned, a compute buffer and the slot line).
  bool complete() const;
  Comparison findings() const;
  Comparison finish() const;
  const StartupFacts& facts() const { return parser_.facts(); }

 private:
  std::optional<Expectation> expected_;
  StartupLogParser parser_;
};

}  // namespace kvgate::engine
