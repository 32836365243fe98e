// kvgate up --engines N: N engines of the planned launch side by side, each under its own
// supervisor with a gateway of its own, behind one Fleet (fleet/fleet.h) on --listen.
//
// What one engine has, each has: its own folder under the instance directory (sessions and
// saved engine states), its own log (engine-I.log), restarts on crash or hang. The Fleet keeps
// each conversation on the engine holding its cache; an engine that is not serving (starting,
// restarting, given up) is out of the routing at once, its conversations served by the others
// with one prefill each, and it rejoins once it has served for a while again. The plan is made
// once: N of it must fit the memory budget.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <set>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/gateway_setup.h"
#include "cli/up_steps.h"
#include "device/tree.h"
#include "engine/status_report.h"
#include "fleet/fleet.h"
#include "gateway/response_store.h"
#include "http/http_server.h"
#include "plan/launch_args.h"
#include "util/private_files.h"
#include "util/units.h"

namespace kvgate::cli::up {
namespace {

struct Unit {
  Prepared p;
  std::unique_ptr<engine::Supervisor> supervisor;
  std::shared_ptr<std::atomic<int64_t>> ready_since = std::make_shared<std::atomic<int64_t>>(0);
  std::unique_ptr<gateway::Gateway> gateway;
  std::string state_note;
  bool announced = false;
  bool served = false;  // has served since kvgate started (before, it is only starting)
};

// Whether --engine-devices gives every engine GPUs no other engine sees.
bool disjoint_devices(const std::vector<std::string>& sets) {
  if (sets.empty()) return false;
  std::set<std::string> seen;
  for (const auto& set : sets) {
    for (std::string_view d : device::split(set, ',')) {
      if (!seen.emplace(d).second) return false;
    }
  }
  return true;
}

// Engine `i`'s launch: the planned one with its own folder and saved-state folder.
Result<Prepared> engine_launch(const UpConfig& cfg, const Prepared& base, size_t i) {
  Prepared p = base;
  p.instance_dir = base.instance_dir / fmt::format("engine-{}", i);
  KV_TRY(util::make_private_dir(p.instance_dir));
  p.kv = kv_options(cfg, p.caps, p.instance_dir, p.start);
  // A conversation that moves here from an engine that went down takes its saved state.
  for (size_t j = 0; j < cfg.engines && p.kv.enabled(); ++j) {
    if (j != i) p.kv.siblings.push_back(kv_dir_of(base.instance_dir / fmt::format("engine-{}", j)));
  }
  p.engine_env = engine_env(cfg, i);
  p.start.settings.slot_save_path.reset();
  if (p.kv.enabled()) p.start.settings.slot_save_path = p.kv.dir.string();
  KV_ASSIGN_OR_RETURN(p.args, plan::launch_args(p.start.settings, p.caps));
  return p;
}

Result<std::unique_ptr<Unit>> open_unit(const UpConfig& cfg, const Prepared& base, size_t i,
                                        const std::shared_ptr<gateway::ResponseStore>& responses,
                                        gateway::Fleet* const* fleet) {
  auto u = std::make_unique<Unit>();
  KV_ASSIGN_OR_RETURN(u->p, engine_launch(cfg, base, i));
  KV_ASSIGN_OR_RETURN(auto log, engine::RotatingLog::open(log_dir_of(cfg) / fmt::format("engine-{}.log", i),
                                                          cfg.log_max_bytes, cfg.log_keep));
  u->supervisor = std::make_unique<engine::Supervisor>(
      supervisor_config(cfg, u->p, std::shared_ptr<engine::RotatingLog>(std::move(log))));
  KV_ASSIGN_OR_RETURN(gateway::GatewayOptions go,
                      up_gateway_options(cfg, u->p, *u->supervisor, u->ready_since));
  // A stored Responses answer continues on any engine; the Fleet learns which conversation
  // stored it.
  go.responses = responses;
  go.on_response_stored = [fleet](const std::string& id) {
    if (*fleet != nullptr) (*fleet)->response_stored(id);
  };
  u->gateway = std::make_unique<gateway::Gateway>(go, supervised_upstream(*u->supervisor));
  KV_ASSIGN_OR_RETURN(u->state_note, open_state(*u->gateway, cfg, u->p));
  follow_engine(*u->supervisor, *u->gateway, u->ready_since);
  return u;
}

std::unique_ptr<gateway::Fleet> make_fleet(const std::vector<std::unique_ptr<Unit>>& units) {
  std::vector<gateway::FleetMember> members;
  for (size_t i = 0; i < units.size(); ++i) {
    engine::Supervisor* s = units[i]->supervisor.get();
    members.push_back(
        fleet_member(fmt::format("engine-{}", i), *units[i]->gateway,
                     static_cast<double>(std::max<uint32_t>(1, units[i]->p.start.settings.parallel)),
                     [s] { s->report_upstream_failure("the gateway could not reach it"); }));
  }
  gateway::FleetOptions fo;
  // New conversations strictly by load: above the average an engine would evict one
  // conversation's KV for another while others have free slots.
  fo.router.load_factor = 1.0;
  fo.router.rejoin_after = std::chrono::seconds(2);
  return std::make_unique<gateway::Fleet>(std::move(members), fo);
}

// Until a signal (exit 0) or until every engine was given up (exit 1). Each tick tells the
// Fleet which engines serve: one that does not is out of the routing at once.
int watch_engines(const util::StopSignals& stop_signals, std::vector<std::unique_ptr<Unit>>& units,
                  gateway::Fleet& fleet, const std::string& gateway_line, const fs::path& log_dir) {
  bool first_ready = true;
  for (;;) {
    if (const auto why = stop_signals.wait(std::chrono::milliseconds(200))) {
      say(fmt::format("{} received: stopping", *why));
      return kExitOk;
    }
    size_t given_up = 0;
    for (size_t i = 0; i < units.size(); ++i) {
      Unit& u = *units[i];
      const auto st = u.supervisor->status();
      const bool serving = engine::is_serving(st.state);
      if (serving) {
        u.served = true;
        fleet.report_probe(i, true);
      } else if (u.served) {
        fleet.router().set_down(i, std::chrono::steady_clock::now());
      }
      if (st.state == engine::State::kFailed) {
        if (u.announced) say(fmt::format("engine-{} given up: {}", i, st.cause));
        u.announced = false;
        ++given_up;
      } else if (serving && !u.announced) {
        u.announced = true;
        say(fmt::format("engine-{}:", i));
        announce_ready(st,
                       first_ready ? gateway_line : fmt::format("engine-{} serves behind the gateway", i));
        first_ready = false;
      }
    }
    if (given_up == units.size()) {
      say("giving up: no engine serves; their logs are in " + log_dir.string());
      return kExitFailure;
    }
  }
}

}  // namespace

int serve_engines(const UpConfig& cfg, const Prepared& base, const util::StopSignals& stop_signals) {
  const size_t n = cfg.engines;
  // The reserve (OS, driver) is kept once, whatever runs beside it.
  const uint64_t reserve = std::min(base.start.memory.reserve, base.start.memory.total());
  const uint64_t each = base.start.memory.total() - reserve;
  // On GPUs of their own each engine has the budget to itself: the plan fitted it once.
  const bool own_devices = disjoint_devices(cfg.engine_devices);
  if (!own_devices && base.start.budget.bytes && each * n + reserve > *base.start.budget.bytes) {
    say(fmt::format(
        "{} engines need {} ({} each and a {} reserve), more than the memory budget {}: give fewer "
        "--engines, a smaller --ctx or --parallel, or --cache-ram",
        n, util::format_bytes(each * n + reserve), util::format_bytes(each), util::format_bytes(reserve),
        util::format_bytes(*base.start.budget.bytes)));
    return kExitFailure;
  }
  auto responses = std::make_shared<gateway::ResponseStore>();
  gateway::Fleet* fleet_ptr = nullptr;
  std::vector<std::unique_ptr<Unit>> units;
  for (size_t i = 0; i < n; ++i) {
    auto u = open_unit(cfg, base, i, responses, &fleet_ptr);
    if (!u) {
      say(fmt::format("engine-{}: {}", i, u.error().message()));
      return kExitFailure;
    }
    if (auto d = (*u)->p.engine_env.find("CUDA_VISIBLE_DEVICES"); d != (*u)->p.engine_env.end()) {
      say(fmt::format("engine-{}: CUDA_VISIBLE_DEVICES={}", i, d->second));
    }
    units.push_back(std::move(*u));
  }
  auto fleet = make_fleet(units);
  fleet_ptr = fleet.get();
  http::HttpServerOptions http = front_options(cfg);
  http.head_check = [f = fleet.get()](const http::HttpRequest& head) { return f->check_head(head); };
  http::HttpServer front(
      http, [f = fleet.get()](const http::HttpRequest& r, http::ResponseWriter& w) { f->handle(r, w); });
  if (auto st = front.start(); !st) {
    say(st.error().message() + " (no kvgate up holds it: another program does)");
    return kExitFailure;
  }
  if (!front.bound_loopback() && !cfg.api_key) {
    say(fmt::format(
        "--listen {} resolves to a non-loopback address: give --api-key so clients must authenticate",
        cfg.listen.host));
    return kExitUsage;
  }
  const auto& go = units.front()->gateway->options();
  const std::string gateway_line = fmt::format(
      "gateway: http://{}:{}/v1  ({} engines, each conversation kept on one; per engine: {}; compaction {} "
      "at {} tokens{})",
      cfg.listen.host, front.port(), n, units.front()->state_note, go.compaction ? "on" : "off",
      go.high_watermark_tokens.value_or(0), cfg.api_key ? "; clients send --api-key" : "");
  say(fmt::format("engine: {}", base.caps.describe()));
  say(fmt::format("plan (each of {} engines): {}", n,
                  plan_summary(base.start.memory, base.start.budget.bytes)));
  say(fmt::format("engine logs: {}/engine-N.log", log_dir_of(cfg).string()));
  for (auto& u : units) u->supervisor->start();
  const int exit_code = watch_engines(stop_signals, units, *fleet, gateway_line, log_dir_of(cfg));
  for (auto& u : units) {
    if (exit_code == kExitOk && engine::is_serving(u->supervisor->status().state))
      u->gateway->save_kv_states();
  }
  for (auto& u : units) u->supervisor->stop();
  front.stop();
  std::error_code ec;
  fs::remove(base.key_file, ec);
  return exit_code;
}

}  // namespace kvgate::cli::up
