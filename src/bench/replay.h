// kvgate bench replay: an agent trace replayed straight to the engine and through kvgate,
// one path after the other in one run, with the same engine settings.
//
// Fairness: each path gets a fresh engine (LocalEngine, same model, context and flags), so
// neither inherits the other's KV cache, host prompt cache or slot state. Each turn's
// request is the trace's, as the agent sent it, with only the benchmark's own settings
// applied identically on both paths: streaming on (default: TTFT is measured on every turn;
// StreamMode::kTrace keeps the trace's choice, and a non-streamed turn's TTFT is its total
// time), `stream_options.include_usage`, and optionally max_tokens and a plain-words logit
// bias for random-weight models. In --live mode the model's own replies replace the
// trace's assistant messages (trace.h: live_history).
//
// Per turn: HTTP status and failure class (failure.h), TTFT and total time seen by the
// client, the prompt/cached/prefilled tokens the answer reports (usage and timings), the
// engine's own counters over the turn (llamacpp:prompt_tokens_total and
// _cached_total: everything the engine computed, including compaction summaries), and
// the gateway's compaction events of the turn (from GET /kvgate/v1/sessions).
//
// Restarts (restart_every N): on each path the engine is killed with SIGKILL after every N
// turns — once the turn is over, the gateway's work after the answer included — and a fresh
// engine with the same settings is started before the next turn, as a supervisor restarts a
// crashed engine. Its KV cache is gone; through the gateway, with saved conversation states
// (gateway.kv), the conversation's state comes back from the file the engine saved. The
// summary splits each path's figures into the turns right after a restart and the others.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/engine_queries.h"
#include "bench/failure.h"
#include "bench/local_engine.h"
#include "bench/output_dir.h"
#include "bench/progress.h"
#include "bench/stats.h"
#include "bench/trace.h"
#include "gateway/gateway.h"
#include "util/result.h"

namespace kvgate::bench {

enum class StreamMode { kForce, kTrace };

struct ReplayOptions {
  LocalEngineOptions engine;  // one fresh engine per path with these options
  bool direct = true;
  bool through_gateway = true;
  bool live = false;
  std::optional<int> max_tokens;
  bool plain_words = false;
  StreamMode stream = StreamMode::kForce;
  // Gateway path: with gateway.kv.disk_budget_bytes > 0 the gateway keeps conversations'
  // engine states (kvstate/kv_keeper.h) in a temporary folder, removed at the end, that its engine
  // saves slots into (--slot-save-path; gateway.kv.dir is set to it). The direct path's engine
  // never gets one.
  gateway::GatewayOptions gateway;
  std::optional<std::filesystem::path> log_dir;  // engine-direct.log, engine-gateway.log
  size_t restart_every = 0;                      // 0: no restarts; N: SIGKILL and restart after every N turns
  std::string saved_states_off;                  // why gateway.kv is off despite restarts (for the report)
};

struct TurnResult {
  size_t turn = 0;  // 1-based
  int status = 0;
  FailureKind failure = FailureKind::kNone;
  std::string error;
  bool stream = true;
  bool live = false;
  size_t request_messages = 0;
  size_t request_bytes = 0;
  double ttft_ms = -1;  // -1: no token arrived
  double total_ms = 0;
  uint64_t prompt_tokens = 0;  // of the answer; for a context overflow, what the engine counted
  uint64_t cached_tokens = 0;
  uint64_t prefilled_tokens = 0;
  double engine_processed = 0;  // engine counters over the turn
  double engine_cached = 0;
  bool engine_cached_known = true;  // the engine exports its reuse counter
  bool after_restart = false;       // the first turn on an engine started again after a kill
  nlohmann::json compactions = nlohmann::json::array();  // the gateway's events of this turn
  bool ok() const { return failure == FailureKind::kNone; }
};

// The turns of one kind (right after a restart, or the others): how many, how many were
// answered, and the figures of those answered.
struct TurnGroup {
  size_t turns = 0;
  size_t ok = 0;
  uint64_t prompt_tokens = 0, cached_tokens = 0, prefilled_tokens = 0;
  Summary ttft_ms;
};

struct PathSummary {
  size_t turns = 0;
  size_t ok = 0;
  std::map<std::string, size_t> failures;                               // by failure_name
  size_t first_failure_turn = 0;                                        // 0: none
  uint64_t prompt_tokens = 0, cached_tokens = 0, prefilled_tokens = 0;  // successful turns
  double prefilled_ratio = 0;                                           // prefilled / prompt
  double engine_processed = 0, engine_cached = 0;                       // all turns
  double engine_processed_ratio = 0;                                    // processed / (processed + cached)
  bool engine_cached_known = true;                                      // every turn's reuse was counted
  Summary ttft_ms;                                                      // successful turns
  Summary total_ms;                                                     // all turns
  size_t compactions = 0;
  std::vector<size_t> restart_turns;  // the turns that followed a restart (TurnResult::after_restart)
  TurnGroup after_restart, other_turns;
};
PathSummary summarize_path(const std::vector<TurnResult>& turns);

struct PathResult {
  std::string name;  // "direct" or "gateway"
  std::string engine_command;
  std::vector<TurnResult> turns;
  bool saved_states = false;  // the gateway kept conversations' engine states (ReplayOptions::gateway.kv)
  PathSummary summary;
  size_t sessions = 0;       // gateway sessions at the end (1: the conversation was recognised every turn)
  size_t stale_retries = 0;  // requests resent because the server had closed the kept-alive connection
  // Gateway path: the cost of its exact token accounting over the replay (exact counts made,
  // pieces tokenised, milliseconds), from GET /kvgate/v1/status.
  nlohmann::json accounting;
  double wall_s = 0;
};

struct ReplayReport {
  std::string trace;
  nlohmann::json options;
  size_t restart_every = 0;      // ReplayOptions::restart_every
  std::string saved_states_off;  // ReplayOptions::saved_states_off
  std::vector<PathResult> paths;
  double wall_s = 0;
  const PathResult* path(std::string_view name) const;
};

Result<ReplayReport> run_replay(const Trace& trace, const ReplayOptions& options,
                                const ProgressFn& progress = {});

// gateway / direct over the turns both answered: TTFT (sum and p50), prefilled tokens.
nlohmann::json compare_paths(const PathResult& direct, const PathResult& gateway);

Status write_replay(const ReplayReport& report, OutputDir& out);
std::string replay_text(const ReplayReport& report);
nlohmann::json to_json(const ReplayReport& report);

}  // namespace kvgate::bench
