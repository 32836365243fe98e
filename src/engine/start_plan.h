// The engine `kvgate up` starts, planned from the model, the probed build and the device:
// the settings it is launched with and their memory bill. The choices are the planner's
// (plan/engine_choices.h); this adds what only the device knows:
//   - the budget: --memory when given; else, on unified memory (a Jetson), MemAvailable;
//     else none (a discrete GPU's budget is the user's to give);
//   - on unified memory the budget also sizes the host prompt cache and checkpoints the
//     options leave unset (plan/unified_defaults.h).
// A plan over its budget is returned as such (over_budget()): the caller refuses it with a
// message that fits its command.
//
// Pure functions; thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "device/facts.h"
#include "plan/memory_model.h"
#include "plan/model_desc.h"
#include "plan/server_caps.h"
#include "plan/server_settings.h"
#include "util/result.h"

namespace kvgate::engine {

struct MemoryBudget {
  std::optional<uint64_t> bytes;  // none: no limit known
  std::string source;             // "--memory", "MemAvailable" or "" (none)
};

// The budget a plan must fit (see above).
MemoryBudget memory_budget(std::optional<uint64_t> given, const device::Facts& device);

struct StartRequest {
  plan::ServerSettings settings;        // from the options, model_path set
  std::optional<int32_t> n_gpu_layers;  // --ngl; unset: plan::default_gpu_layers
  uint64_t reserve_bytes = 1024ull << 20;
  std::optional<uint64_t> memory_budget;  // --memory
};

struct StartPlan {
  plan::ServerSettings settings;  // what the engine is launched with
  plan::MemoryPlan memory;
  MemoryBudget budget;
  bool shifts = false;  // the engine shifts cached chunks (plan::shifts_cached_chunks)
  bool over_budget() const { return budget.bytes && memory.total() > *budget.bytes; }
};

// Error when the planner refuses the settings (plan::plan_memory).
Result<StartPlan> plan_start(const plan::ModelDescriptor& model, const plan::ServerCaps& caps,
                             const device::Facts& device, const StartRequest& request);

}  // namespace kvgate::engine
