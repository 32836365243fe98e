#include "plan/unified_defaults.h"

#include <algorithm>

namespace kvgate::plan {

UnifiedDefaults unified_host_defaults(const UnifiedInputs& in) {
  UnifiedDefaults out;
  const uint64_t free = in.free_bytes > 0 ? static_cast<uint64_t>(in.free_bytes) : 0;
  const uint64_t slots = std::max<uint32_t>(1, in.slots);
  uint64_t checkpoints_bill = 0;
  if (in.checkpoint_bytes > 0) {
    const uint64_t affordable = free / 4 / (slots * in.checkpoint_bytes);
    const uint64_t cap = std::min<uint64_t>(in.engine_checkpoints, kUnifiedMaxCheckpoints);
    const auto count =
        static_cast<uint32_t>(std::clamp<uint64_t>(affordable, std::min<uint64_t>(1, cap), cap));
    out.ctx_checkpoints = count;
    checkpoints_bill = uint64_t{count} * slots * in.checkpoint_bytes;
  }
  const uint64_t rest = free > checkpoints_bill ? free - checkpoints_bill : 0;
  constexpr uint64_t kMiB = 1ULL << 20;
  const uint64_t share_mib = rest / 4 / kMiB / kUnifiedCacheStepMiB * kUnifiedCacheStepMiB;
  out.cache_ram_mib = std::min(kEngineCacheRamMiB, share_mib);
  if (in.ik_entry_bytes && out.cache_ram_mib > 0 && *in.ik_entry_bytes > out.cache_ram_mib * kMiB) {
    out.cache_ram_mib = 0;
    out.ik_cache_off = true;
  }
  return out;
}

}  // namespace kvgate::plan
