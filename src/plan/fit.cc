#include "plan/fit.h"

#include <algorithm>

#include <fmt/format.h>

#include "plan/engine_quirks.h"

#include "plan/kv_type.h"
#include "util/units.h"

namespace kvgate::plan {
namespace {

struct Search {
  uint32_t max_ctx = 0;
  std::string error;
};

// Largest ctx (a multiple of `step`, at most `limit`) whose plan fits `budget`.
Search largest_fitting(const ModelDescriptor& m, ServerSettings s, const PlanOptions& o, uint64_t budget,
                       uint32_t step, uint32_t limit) {
  Search out;
  auto fits = [&](uint32_t ctx) -> std::optional<bool> {
    s.ctx = ctx;
    auto plan = plan_memory(m, s, o);
    if (!plan) {
      out.error = plan.error().message();
      return std::nullopt;
    }
    return plan->total() <= budget;
  };
  uint64_t lo = 0;  // multiples of step known to fit (0 = none)
  uint64_t hi = std::max<uint64_t>(1, limit / step);
  auto first = fits(step);
  if (!first || !*first) return out;
  lo = 1;
  auto top = fits(static_cast<uint32_t>(hi * step));
  if (!top) return out;
  if (*top) {
    out.max_ctx = static_cast<uint32_t>(hi * step);
    return out;
  }
  while (hi - lo > 1) {
    const uint64_t mid = (lo + hi) / 2;
    auto ok = fits(static_cast<uint32_t>(mid * step));
    if (!ok) return out;
    (*ok ? lo : hi) = mid;
  }
  out.max_ctx = static_cast<uint32_t>(lo * step);
  return out;
}

}  // namespace

uint32_t safe_cap(uint32_t n_ctx_slot) { return n_ctx_slot / 4 * 3 / 256 * 256; }

Result<FitResult> fit(const ModelDescriptor& m, const ServerSettings& base, const PlanOptions& options,
                      const FitRequest& req) {
  if (req.budget == 0) return Error("--fit needs a memory budget (--memory SIZE)");
  // On unified memory the host caches left unset are sized from what each context leaves,
  // so the search trades them against context (unified_defaults.h).
  PlanOptions o = options;
  if (o.unified_memory && o.memory_budget == 0) o.memory_budget = req.budget;
  const uint32_t slots = std::max<uint32_t>(1, base.parallel);
  const bool streams = o.fork == Fork::kMainline && !base.kv_unified.value_or(false);
  const uint32_t step = 256 * (streams ? slots : 1);
  uint64_t limit = m.n_ctx_train > 0 ? uint64_t{m.n_ctx_train} * (streams ? slots : 1) : 1ULL << 20;
  if (req.target_ctx) limit = std::min<uint64_t>(limit, *req.target_ctx);
  limit = std::max<uint64_t>(limit / step * step, step);
  const uint32_t target = static_cast<uint32_t>(limit);

  std::vector<std::pair<std::string, std::string>> candidates;  // K, V
  if (req.auto_type) {
    for (auto t : kv_types_by_precision(o.fork)) candidates.emplace_back(std::string(t), std::string(t));
  } else {
    candidates.emplace_back(base.cache_type_k, base.cache_type_v);
  }

  FitResult result;
  result.ctx_limit = target;
  int best = -1;
  for (size_t i = 0; i < candidates.size(); ++i) {
    ServerSettings s = base;
    s.cache_type_k = candidates[i].first;
    s.cache_type_v = candidates[i].second;
    if (req.caps != nullptr) {
      if (auto runs = check_cache_pair(*req.caps, s.cache_type_k, s.cache_type_v, s.flash_attn); !runs) {
        result.trials.push_back({candidates[i].first, 0, runs.error().message()});
        continue;
      }
    }
    Search found = largest_fitting(m, s, o, req.budget, step, target);
    result.trials.push_back({candidates[i].first, found.max_ctx, found.error});
    if (found.max_ctx == 0) continue;
    if (best < 0 || found.max_ctx > result.trials[static_cast<size_t>(best)].max_ctx) best = static_cast<int>(i);
    if (found.max_ctx >= target) {
      best = static_cast<int>(i);
      break;
    }
  }
  if (best < 0) {
    ServerSettings s = base;
    s.ctx = step;
    std::string why;
    for (const auto& t : result.trials) {
      if (!t.error.empty()) why = t.error;
    }
    if (!why.empty()) return Error(why);
    auto smallest = plan_memory(m, s, o);
    if (!smallest) return std::move(smallest).error();
    return Error(fmt::format("nothing fits: even a {}-token context needs {} MiB, the budget is {} MiB", step,
                             util::format_mib(smallest->total()), util::format_mib(req.budget)));
  }
  const size_t b = static_cast<size_t>(best);
  result.settings = base;
  result.settings.cache_type_k = candidates[b].first;
  result.settings.cache_type_v = candidates[b].second;
  result.max_ctx = result.trials[b].max_ctx;
  result.settings.ctx = std::min(result.max_ctx, target);
  KV_ASSIGN_OR_RETURN(result.plan, plan_memory(m, result.settings, o));
  return result;
}

}  // namespace kvgate::plan
