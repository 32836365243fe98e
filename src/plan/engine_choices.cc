#include "plan/engine_choices.h"

#include <algorithm>

#include <fmt/format.h>

#include "plan/engine_quirks.h"

namespace kvgate::plan {

int32_t default_gpu_layers(const ServerCaps& caps) { return caps.gpu_offload ? -1 : 0; }

bool attention_only(const MemoryPlan& plan) {
  if (plan.recurrent) return false;
  return std::all_of(plan.caches.begin(), plan.caches.end(),
                     [](const CacheBill& c) { return c.role == CacheRole::kMain; });
}

ServerSettings choose_engine_settings(const ServerSettings& settings, const ServerCaps& caps,
                                      const MemoryPlan& plan) {
  ServerSettings s = with_sized_defaults(settings, plan);
  if (!s.cache_reuse && caps.accepts("--cache-reuse 0") && attention_only(plan)) s.cache_reuse = kCacheReuseChunk;
  choose_fork_settings(caps, plan.recurrent.has_value(), s);
  return s;
}

bool shifts_cached_chunks(const ServerSettings& settings, const MemoryPlan& plan) {
  return settings.cache_reuse.value_or(0) > 0 && !plan.recurrent;
}

SavedStateChoice choose_saved_state(const ServerCaps& caps, const SavedStateRequest& r) {
  SavedStateChoice c;
  if (r.disk_bytes == 0u) return c;
  if (!slot_states_reliable(caps.fork)) {
    c.off_because =
        "this ik_llama.cpp build loses the answers of slot save/restore now and then, and then stops "
        "answering (plan/engine_quirks.h)";
    return c;
  }
  if (!caps.help_flags.count("--slot-save-path")) {
    c.off_because = fmt::format("{} has no --slot-save-path", caps.describe());
    return c;
  }
  if (r.disk_bytes) {
    c.disk_budget_bytes = *r.disk_bytes;
    return c;
  }
  const uint32_t share = std::max<uint32_t>(1, r.free_share);
  const uint64_t budget = std::min<uint64_t>(r.free_bytes / share, kMaxSavedStateBytes);
  if (budget < kMinSavedStateBytes) {
    c.off_because = fmt::format("less than {} MiB free in {}", (kMinSavedStateBytes >> 20) * share, r.where);
    return c;
  }
  c.disk_budget_bytes = budget;
  return c;
}

}  // namespace kvgate::plan
