// The engine and memory panels of the gateway's status (GET /kvgate/v1/status, the status
// page): what the supervisor knows of the running engine, and the memory plan's bill next to
// what the engine's startup log reported.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/supervisor.h"
#include "plan/memory_model.h"

namespace kvgate::engine {

// {state, fork, build, restarts, generation, pid, uptime_s, ready_in_ms, startup_checks}.
// `uptime_s`: since the running engine became ready (nullopt: not serving).
nlohmann::json engine_status_json(const SupervisorStatus& status, plan::Fork fork, const std::string& build,
                                  std::optional<double> uptime_s);

// {budget_bytes, budget_source, unified_memory, n_ctx, n_ctx_slot, slots, components
// [{name, planned_bytes, reported_bytes}], planned_total_bytes}. Reported figures come from
// `reported` (MiB, rounded to bytes); null where the log gave none.
nlohmann::json memory_status_json(const plan::MemoryPlan& plan, std::optional<uint64_t> budget,
                                  const std::string& budget_source, const ReportedMemory* reported);

}  // namespace kvgate::engine
