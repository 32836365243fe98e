// kvgate bench clients: families of simulated agent clients (client_sim.h) run through kvgate
// in front of the engine, and optionally straight to the engine for comparison, with the
// properties kvgate must hold checked over every run (client_run.h).
//
// A run is one behaviour with one seed on one path. Each run gets a fresh engine (LocalEngine:
// the same model and flags, `slots` = the behaviour's parallel clients, each slot `context`
// tokens; with reuse_engines one engine per slot count serves the runs in turn) and, on the
// gateway path, a fresh LocalGateway (durable sessions in a temporary store), so no run
// inherits another's sessions. Parallel clients are interleaved
// turn by turn, one request at a time, so each turn's figures are its own.
//
// Per turn: the client's request is counted with the engine's template and tokenizer (all
// of it, its increment, and from the message the client rewrote), then sent; the answer's
// status, failure class and usage, the engine's counters over the turn, and — on the
// gateway path, from GET /kvgate/v1/sessions — the session that served it (the one whose
// request count grew) and the compactions it ran. The assistant message of the answer is
// the client's next input. With `plain_words` every request carries a logit bias towards
// common English words (random-weight models otherwise emit bytes the engine's output
// parser may reject), as `bench replay --plain-words` does. Turns that require a tool call
// are answered by the tool model (tool_model.h: a real generation of the engine constrained
// to the template's call format), the pinned engine ignoring tool_choice "required" — on the
// gateway path it is the gateway's upstream, on the direct path the harness calls it.
//
// Failed requests are kept: every one is written, with the answer's error, to
// failed/<behaviour>-s<seed>-<path>-c<client>-t<turn>.json in the output folder.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/client_run.h"
#include "bench/client_sim.h"
#include "bench/local_engine.h"
#include "bench/output_dir.h"
#include "bench/progress.h"
#include "gateway/gateway.h"
#include "util/result.h"

namespace kvgate::bench {

struct ClientsOptions {
  LocalEngineOptions engine;  // model, server, flags; context and slots are set per run
  uint64_t context = 16384;   // tokens per slot
  gateway::GatewayOptions gateway;
  std::vector<ClientSpec> behaviours;
  std::vector<uint64_t> seeds = {1, 2, 3};
  size_t turns = 30;  // per client
  bool plain_words = false;
  bool direct = false;
  bool through_gateway = true;
  // One engine for all the runs that need the same slots, instead of a fresh one per run:
  // saves the starts (seconds each); a run's first request may then find the few tokens its
  // system prompt shares with the previous run's in the engine's cache.
  bool reuse_engines = false;
  std::optional<std::filesystem::path> log_dir;  // engine logs and failed requests
};

struct ClientsReport {
  nlohmann::json options;
  std::vector<ClientRun> runs;  // behaviour by behaviour, seed by seed, direct before gateway
  double wall_s = 0;
};

Result<ClientsReport> run_clients(const ClientsOptions& options, const ProgressFn& progress = {});

// The watermarks the gateway applies to a behaviour (GatewayOptions, as chat.cc reads them).
Watermarks watermarks(const gateway::GatewayOptions& gateway, uint64_t context, const ClientSpec& spec);

Status write_clients(const ClientsReport& report, OutputDir& out);
std::string clients_text(const ClientsReport& report);
nlohmann::json to_json(const ClientsReport& report);

}  // namespace kvgate::bench
