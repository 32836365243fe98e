// fit: the largest context (and, with `--ctk auto`, the most precise KV type) whose whole
// memory bill — weights, KV, recurrent state, compute, output, host prompt cache,
// checkpoints and the reserve — fits a memory budget.
//
// Contexts are searched in the engine's own steps (256 cells per stream) up to the training
// context (× slots when each slot has its own stream), or up to the requested context when
// one is given. With auto types, candidates go from f16 down to q4_0; the first type that
// reaches the target wins, otherwise the one that reaches the largest context.
//
// On unified memory (PlanOptions::unified_memory) the host prompt cache and the context
// checkpoints the settings leave unset are sized from what each candidate context leaves
// (unified_defaults.h), so the order is: context first; as it grows the prompt cache shrinks
// (to 0) and the checkpoints shrink (to 1 per slot); only then is the context cut.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "plan/memory_model.h"
#include "plan/model_desc.h"
#include "plan/server_caps.h"
#include "plan/server_settings.h"
#include "util/result.h"

namespace kvgate::plan {

struct FitRequest {
  uint64_t budget = 0;                 // bytes for everything, reserve included
  bool auto_type = false;              // choose -ctk/-ctv
  std::optional<uint32_t> target_ctx;  // the context the user asked for, if any
  // The build the plan is for: types its backend cannot run are not chosen (engine_quirks.h).
  const ServerCaps* caps = nullptr;
};

struct FitTrial {
  std::string type;
  uint32_t max_ctx = 0;  // 0: not even the smallest context fits
  std::string error;     // the engine would refuse this type for this model
};

struct FitResult {
  ServerSettings settings;  // with the chosen ctx (and types)
  MemoryPlan plan;          // the plan at that ctx
  uint32_t max_ctx = 0;     // largest -c that fits with the chosen type
  uint32_t ctx_limit = 0;   // upper end of the search
  std::vector<FitTrial> trials;
};

// Error when nothing fits (the message gives the bill at the smallest context).
Result<FitResult> fit(const ModelDescriptor& model, const ServerSettings& base, const PlanOptions& options,
                      const FitRequest& request);

// The recommended compaction cap for a slot of `n_ctx_slot` tokens: three quarters of it,
// rounded down to 256, so a reply and a summarisation prompt still fit above it.
uint32_t safe_cap(uint32_t n_ctx_slot);

}  // namespace kvgate::plan
