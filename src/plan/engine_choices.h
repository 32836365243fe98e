// What kvgate chooses for the engine where the user left a setting unset, from the memory plan
// and what the probed build accepts. `kvgate up` wires these in; the benchmarks that run the
// engine as `kvgate up` does take the same choices. Explicit settings always win.
//   - GPU layers:   every layer where the build can offload (-ngl all), else 0;
//   - host caches:  on unified memory, sized for the board (unified_defaults.h);
//   - chunk reuse:  --cache-reuse 256 for attention-only models on builds that have it. After a
//                   compaction the engine shifts the retained messages' cached chunks into
//                   place, so they stay cached when the summary follows them (the gateway's
//                   summary_after_tail). Recurrent state and sliding-window or indexer caches
//                   cannot shift;
//   - fork quirks:  engine_quirks.h's choose_fork_settings (ik's checkpoint tolerance);
//   - saved state:  whether conversations' engine state is saved (slot save/restore,
//                   --slot-save-path) and how much disk it may take: never on builds whose
//                   save/restore is unreliable (engine_quirks.h) or that lack the flag; by
//                   default a share of the free space, at most 64 GiB, and off when that share
//                   is below 64 MiB.
//
// Pure functions; thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "plan/memory_model.h"
#include "plan/server_caps.h"
#include "plan/server_settings.h"

namespace kvgate::plan {

// Tokens per chunk the engine may shift into place (--cache-reuse N: chunks shorter than this
// are recomputed instead).
inline constexpr uint32_t kCacheReuseChunk = 256;

// -ngl where the user gave none: -1 (all) when the build can offload, else 0.
int32_t default_gpu_layers(const ServerCaps& caps);

// Whether every cache of the plan can shift cached chunks: no recurrent state and no
// sliding-window or indexer cache.
bool attention_only(const MemoryPlan& plan);

// `settings` (as planned) completed for the build and the plan: unified-memory host caches,
// chunk reuse and the fork's own settings, each only where the user left it unset.
ServerSettings choose_engine_settings(const ServerSettings& settings, const ServerCaps& caps,
                                      const MemoryPlan& plan);

// Whether an engine started with `settings` reuses cached chunks by KV shift.
bool shifts_cached_chunks(const ServerSettings& settings, const MemoryPlan& plan);

inline constexpr uint64_t kMinSavedStateBytes = 64ull << 20;
inline constexpr uint64_t kMaxSavedStateBytes = 64ull << 30;

struct SavedStateRequest {
  std::optional<uint64_t> disk_bytes;  // given by the user (0: off); unset: a share of free_bytes
  uint64_t free_bytes = 0;             // free space where the states go (0 when unknown)
  uint32_t free_share = 10;            // the default takes 1/free_share of it
  std::string where;                   // that folder, named in the reason
};

struct SavedStateChoice {
  uint64_t disk_budget_bytes = 0;  // 0: no state saved
  std::string off_because;         // why not, for the user ("" when on or turned off by the user)
  bool enabled() const { return disk_budget_bytes > 0; }
};

SavedStateChoice choose_saved_state(const ServerCaps& caps, const SavedStateRequest& request);

}  // namespace kvgate::plan
