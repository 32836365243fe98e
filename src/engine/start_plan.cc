#include "engine/start_plan.h"

#include "plan/engine_choices.h"

namespace kvgate::engine {

MemoryBudget memory_budget(std::optional<uint64_t> given, const device::Facts& device) {
  if (given) return {given, "--memory"};
  if (device.unified_memory) {
    if (auto available = device.default_budget()) return {available, "MemAvailable"};
  }
  return {};
}

Result<StartPlan> plan_start(const plan::ModelDescriptor& model, const plan::ServerCaps& caps,
                             const device::Facts& device, const StartRequest& request) {
  StartPlan start;
  start.budget = memory_budget(request.memory_budget, device);
  plan::ServerSettings settings = request.settings;
  settings.n_gpu_layers = request.n_gpu_layers.value_or(plan::default_gpu_layers(caps));
  KV_ASSIGN_OR_RETURN(start.memory,
                      plan::plan_memory(model, settings,
                                        {.fork = caps.fork,
                                         .reserve_bytes = request.reserve_bytes,
                                         .has_accelerator = caps.gpu_offload,
                                         .unified_memory = device.unified_memory,
                                         .memory_budget = device.unified_memory ? start.budget.bytes.value_or(0) : 0}));
  start.settings = plan::choose_engine_settings(settings, caps, start.memory);
  start.shifts = plan::shifts_cached_chunks(start.settings, start.memory);
  return start;
}

}  // namespace kvgate::engine
