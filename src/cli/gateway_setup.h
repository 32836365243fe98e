// The gateway's options from `kvgate up`'s and `kvgate serve`'s resolved options and what is
// known of the engine behind it (its slot context, slots, fork, longest token): one place for
// the watermark arithmetic and the defaults both commands share; its HTTP front's; and a
// gateway as a member of a fleet.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "cli/up_options.h"
#include "fleet/fleet.h"
#include "gateway/gateway.h"
#include "http/http_server.h"
#include "plan/server_settings.h"

namespace kvgate::cli {

struct EngineShape {
  uint32_t n_ctx_slot = 0;       // tokens per slot
  int slots = 1;
  plan::Fork fork = plan::Fork::kMainline;
  uint64_t max_token_bytes = 0;  // longest vocabulary entry (0: unknown)
  bool shifts = false;           // the engine reuses cached chunks by KV shift (--cache-reuse)
  std::string model_name = "kvgate";
};

// Everything but the callbacks, the saved-state options and the status page's reports.
// The high watermark: --high-watermark (tokens, or a fraction of the slot), else the
// planner's safe cap of the slot; the low one a fraction of it.
gateway::GatewayOptions gateway_options(const UpConfig& cfg, const EngineShape& engine);

// The gateway's HTTP front (without its head check): --listen, --max-body, --allow-host.
http::HttpServerOptions front_options(const UpConfig& cfg);

// `gateway` (which outlives the fleet) as a fleet member: the fleet sees only its handler and
// head check.
gateway::FleetMember fleet_member(std::string name, gateway::Gateway& gateway, double weight,
                                  std::function<void()> probe_now);

}  // namespace kvgate::cli
