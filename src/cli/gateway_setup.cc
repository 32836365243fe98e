#include "cli/gateway_setup.h"

#include <algorithm>

#include "plan/fit.h"

namespace kvgate::cli {

gateway::GatewayOptions gateway_options(const UpConfig& cfg, const EngineShape& e) {
  gateway::GatewayOptions go;
  go.api_keys = cfg.api_keys;
  go.slots = std::max(1, e.slots);
  go.max_sessions = cfg.max_sessions;
  go.session_retention_age = std::chrono::duration_cast<std::chrono::seconds>(cfg.session_retention);
  go.session_retention_count = cfg.max_stored_sessions;
  go.thinking.default_on = cfg.thinking;
  go.compaction = cfg.compaction;
  go.keepalive = std::chrono::milliseconds(cfg.keepalive.count());
  go.model_name = e.model_name;
  go.engine_fork = e.fork;
  go.context_tokens = e.n_ctx_slot;
  go.max_messages = cfg.max_messages;
  go.max_token_bytes = e.max_token_bytes;
  go.count_time_limit = cfg.count_timeout;
  go.compaction_options.time_limit = cfg.compaction_timeout;
  go.compaction_options.summary_prompt_limit = e.n_ctx_slot;
  const auto& hw = cfg.high_watermark;
  const uint64_t high = hw && hw->tokens     ? *hw->tokens
                        : hw && hw->fraction ? static_cast<uint64_t>(static_cast<double>(e.n_ctx_slot) * *hw->fraction)
                                             : plan::safe_cap(e.n_ctx_slot);
  go.high_watermark_tokens = high;
  if (cfg.low_watermark && cfg.low_watermark->tokens) {
    go.low_watermark_fraction = std::min(1.0, static_cast<double>(*cfg.low_watermark->tokens) / static_cast<double>(high));
  } else if (cfg.low_watermark && cfg.low_watermark->fraction) {
    go.low_watermark_fraction = *cfg.low_watermark->fraction;
  }
  // Engines that can shift cached chunks keep the retained messages cached when the summary
  // follows them (mainline --cache-reuse, attention-only models).
  go.compaction_options.summary_after_tail = e.shifts;
  go.engine_shifts = e.shifts;
  go.admission.max_active = cfg.max_inflight.value_or(0);  // 0: the slots
  go.admission.max_waiting = cfg.max_queue;
  go.admission.max_wait = cfg.queue_timeout;
  go.min_upstream_timeout = std::chrono::ceil<std::chrono::seconds>(cfg.upstream_timeout);
  go.generation_timeout = std::chrono::ceil<std::chrono::seconds>(cfg.generation_timeout);
  go.default_max_tokens = cfg.default_max_tokens;
  return go;
}

http::HttpServerOptions front_options(const UpConfig& cfg) {
  http::HttpServerOptions http;
  http.host = cfg.listen.host;
  http.port = cfg.listen.port;
  http.max_body_bytes = cfg.max_body_bytes;
  http.allowed_hosts = cfg.allowed_hosts;
  return http;
}

gateway::FleetMember fleet_member(std::string name, gateway::Gateway& gateway, double weight,
                                  std::function<void()> probe_now) {
  gateway::Gateway* g = &gateway;
  return {.name = std::move(name),
          .handle = [g](const http::HttpRequest& r, http::ResponseWriter& w) { g->handle(r, w); },
          .check_head = [g](const http::HttpRequest& head) { return g->check_head(head); },
          .weight = weight,
          .probe_now = std::move(probe_now)};
}

}  // namespace kvgate::cli
