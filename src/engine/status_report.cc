#include "engine/status_report.h"

#include <cmath>

namespace kvgate::engine {

using nlohmann::json;

json engine_status_json(const SupervisorStatus& st, plan::Fork fork, const std::string& build,
                        std::optional<double> uptime_s) {
  json checks = nullptr;
  if (st.verification && !st.verification->checker.empty()) {
    checks = {{"checker", st.verification->checker},
              {"verified", st.verification->verified},
              {"warnings", st.verification->warnings},
              {"findings", st.verification->findings}};
  }
  return {{"state", state_name(st.state)},
          {"fork", plan::fork_name(fork)},
          {"build", build},
          {"restarts", st.restarts},
          {"generation", st.generation},
          {"pid", st.pid},
          {"cause", st.cause},
          {"uptime_s", uptime_s ? json(*uptime_s) : json(nullptr)},
          {"ready_in_ms", st.last_start.count() > 0 ? json(st.last_start.count()) : json(nullptr)},
          {"startup_checks", checks}};
}

json memory_status_json(const plan::MemoryPlan& p, std::optional<uint64_t> budget, const std::string& budget_source,
                        const ReportedMemory* reported) {
  auto bytes = [](const std::optional<double>& mib) {
    return mib ? json(static_cast<uint64_t>(std::llround(*mib * 1024.0 * 1024.0))) : json(nullptr);
  };
  const ReportedMemory none;
  const ReportedMemory& r = reported ? *reported : none;
  const json components = json::array({
      {{"name", "weights"}, {"planned_bytes", p.weights_device + p.weights_host}, {"reported_bytes", bytes(r.weights)}},
      {{"name", "kv"}, {"planned_bytes", p.kv_bytes()}, {"reported_bytes", bytes(r.kv)}},
      {{"name", "recurrent"}, {"planned_bytes", p.recurrent_bytes()}, {"reported_bytes", bytes(r.recurrent)}},
      {{"name", "compute"}, {"planned_bytes", p.compute_device + p.compute_host}, {"reported_bytes", bytes(r.compute)}},
      {{"name", "output"}, {"planned_bytes", p.output_host}, {"reported_bytes", bytes(r.output)}},
      {{"name", "prompt_cache"}, {"planned_bytes", p.prompt_cache_host}, {"reported_bytes", nullptr}},
      {{"name", "checkpoints"}, {"planned_bytes", p.checkpoints_host}, {"reported_bytes", nullptr}},
      {{"name", "reserve"}, {"planned_bytes", p.reserve}, {"reported_bytes", nullptr}},
  });
  return {{"budget_bytes", budget ? json(*budget) : json(nullptr)},
          {"budget_source", budget ? json(budget_source) : json(nullptr)},
          {"unified_memory", p.unified_memory},
          {"n_ctx", p.n_ctx},
          {"n_ctx_slot", p.n_ctx_slot},
          {"slots", p.n_seq_max},
          {"components", components},
          {"planned_total_bytes", p.total()}};
}

}  // namespace kvgate::engine
