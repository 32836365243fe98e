// Host-cache defaults sized for a unified-memory board (Jetson Orin/Thor, DGX Spark, Apple
// silicon): the GPU and the host draw on one pool, so the engine's fixed defaults — a host
// prompt cache of up to 8 GiB (--cache-ram) and up to 32 context checkpoints per slot — can
// take more than the board has next to weights and KV (a 32 GB Orin with a 27B model at 256K:
// 8 GiB + 4.7 GiB of checkpoints on top of ~20 GiB). With PlanOptions::unified_memory and a
// budget, the plan sizes whatever the user did not set from what is left:
//
//   free         = budget − (weights + KV + recurrent state + compute + output + reserve)
//   checkpoints  = per slot, min(the engine's default 32, 8, ⌊(free / 4) / (slots × one)⌋),
//                  at least 1 for models that need them (hybrid/recurrent, sliding window)
//   prompt cache = min(8192 MiB, ¼ of (free − checkpoints)) rounded down to 256 MiB; 0 below
//                  that, and 0 on ik_llama.cpp when that share cannot hold one full slot
//                  state (ik keeps one entry whatever -cram says)
//
// The rest of `free` (at least half) is left to the other programs on the board. Explicit
// --cache-ram / --ctx-checkpoints always win. Because the shares follow `free`, `--fit`
// maximises context first: as the context grows the prompt cache shrinks to 0 and checkpoints
// to 1 per slot before the context is cut.
//
// Pure functions; thread-compatible.
#pragma once

#include <cstdint>
#include <optional>

namespace kvgate::plan {

struct UnifiedInputs {
  int64_t free_bytes = 0;         // budget minus everything but the host caches (may be negative)
  uint64_t checkpoint_bytes = 0;  // one checkpoint of one slot (0: the model needs none)
  uint32_t slots = 1;
  uint32_t engine_checkpoints = 32;  // the engine's default per slot
  // ik_llama.cpp: the size of one full slot state, which it keeps whatever -cram says.
  std::optional<uint64_t> ik_entry_bytes;
};

struct UnifiedDefaults {
  uint64_t cache_ram_mib = 0;
  std::optional<uint32_t> ctx_checkpoints;  // nullopt when the model needs none
  bool ik_cache_off = false;                // the ik rule turned the prompt cache off
};

inline constexpr uint32_t kUnifiedMaxCheckpoints = 8;
inline constexpr uint64_t kUnifiedCacheStepMiB = 256;
inline constexpr uint64_t kEngineCacheRamMiB = 8192;

UnifiedDefaults unified_host_defaults(const UnifiedInputs& in);

}  // namespace kvgate::plan
