// The steps of `kvgate up` (cli/up.cc) that running several engines behind one gateway
// (--engines N, cli/up_engines.cc) repeats per engine.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/up_options.h"
#include "engine/instance_lock.h"
#include "engine/rotating_log.h"
#include "engine/start_plan.h"
#include "engine/supervisor.h"
#include "gateway/gateway.h"
#include "plan/server_caps.h"
#include "util/stop_signals.h"

namespace kvgate::cli::up {

namespace fs = std::filesystem;

void say(const std::string& line);
int64_t steady_ms();

// What `kvgate up` starts: the model, this instance's locks and directory, the build and the
// launch planned for it.
struct Prepared {
  fs::path model;
  std::string listen;  // HOST:PORT
  std::string who;     // this process, for the lock's description
  std::shared_ptr<engine::InstanceLock> lock;
  fs::path server;
  plan::ServerCaps caps;
  // The instance's own directory (0700): sessions (unless --state-dir none) and the engine's
  // key file (0600), which keeps the key off the engine's command line.
  fs::path instance_dir;
  fs::path key_file;
  engine::StartPlan start;  // its settings as launched: key file and saved-state folder included
  gateway::KvOptions kv;
  std::vector<std::string> args;
  uint64_t max_token_bytes = 0;
  std::string template_note;  // the chat template the engine starts with, for the start log
  std::map<std::string, std::string> engine_env;  // set in the engine's environment (--engine-devices)
};

// Engine `i`'s environment: CUDA_VISIBLE_DEVICES from --engine-devices, when given.
std::map<std::string, std::string> engine_env(const UpConfig& cfg, size_t i);

// Where an instance's engine saves conversations' states (its --slot-save-path).
inline fs::path kv_dir_of(const fs::path& instance_dir) { return instance_dir / "kv"; }
gateway::KvOptions kv_options(const UpConfig& cfg, const plan::ServerCaps& caps, const fs::path& instance_dir,
                              const engine::StartPlan& start);
std::string plan_summary(const plan::MemoryPlan& p, const std::optional<uint64_t>& budget);
engine::SupervisorConfig supervisor_config(const UpConfig& cfg, const Prepared& p,
                                           std::shared_ptr<engine::RotatingLog> log);
// The engine the gateway talks to: the supervisor's, while it serves.
std::shared_ptr<gateway::HttpUpstream> supervised_upstream(engine::Supervisor& supervisor);
Result<gateway::GatewayOptions> up_gateway_options(const UpConfig& cfg, const Prepared& p,
                                                   engine::Supervisor& supervisor,
                                                   std::shared_ptr<std::atomic<int64_t>> ready_since);
// The sessions' store and the saved engine states; what is kept where, for the ready line.
Result<std::string> open_state(gateway::Gateway& gw, const UpConfig& cfg, const Prepared& p);
// A new engine generation tells the gateway its slots are empty; readiness sets the uptime.
void follow_engine(engine::Supervisor& supervisor, gateway::Gateway& gw,
                   std::shared_ptr<std::atomic<int64_t>> ready_since);
void announce_ready(const engine::SupervisorStatus& st, const std::string& gateway_line);
// The engine log's folder: --log-dir, else the instance's under the cache.
fs::path log_dir_of(const UpConfig& cfg);

// --engines N (N > 1): N engines of the planned launch, each supervised and with a gateway of
// its own, behind one Fleet (fleet/fleet.h) on --listen; serves until a signal (exit 0) or
// until every engine was given up (exit 1).
int serve_engines(const UpConfig& cfg, const Prepared& base, const util::StopSignals& stop_signals);

}  // namespace kvgate::cli::up
