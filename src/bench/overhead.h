// kvgate bench overhead: the latency kvgate's gateway adds in front of an engine, in one run.
//
//   small           a two-message chat request (~300 bytes), one generated token
//   small, streamed the same request streamed (time to the end of the stream)
//   large           a chat history of `large_bytes` (default 1 MiB: system prompt and 16 KiB
//                   turns of long English words), one generated token
//   stream          a streamed answer of `stream_tokens` tokens: the relay delay of every
//                   SSE event
//
// Requests go alternately straight to the engine and through an in-process gateway (the
// order flips every pair), after `warmup` unrecorded pairs; "added" is the gateway time
// minus the direct time of the same pair. The direct request carries what the gateway adds
// upstream (enable_thinking=false, id_slot 0, cache_prompt), so both render the same prompt
// and the engine serves both from its KV cache: the difference is the gateway's own work
// (parsing, session recognition and hashing, exact token accounting through the engine's
// /apply-template and /tokenize, the session write, relaying). Every answer's cached tokens
// are recorded; a pair where either path was not served from the cache is reported.
//
// The per-event relay delay comes from TimingUpstream (when the gateway received the
// event from the engine) and the client's arrival time of the same bytes; the final
// [DONE] is reported apart (the gateway sends it after saving the session).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/http_client.h"
#include "bench/output_dir.h"
#include "bench/progress.h"
#include "bench/stats.h"
#include "gateway/gateway.h"
#include "util/result.h"

namespace kvgate::bench {

struct OverheadOptions {
  int warmup = 3;
  int reps = 100;                   // small-request pairs
  uint64_t large_bytes = 1U << 20;  // 0: no large case
  int large_reps = 20;
  int stream_tokens = 64;  // 0: no streaming case
  int stream_reps = 10;
  gateway::GatewayOptions gateway;
};

struct LatencyCase {
  std::string name;
  size_t request_bytes = 0;  // of the client's request
  uint64_t prompt_tokens = 0;
  std::vector<double> direct_ms, gateway_ms, added_ms;
  size_t uncached_pairs = 0;  // pairs where a path computed more than 10% of the prompt
  Summary direct, gateway, added;
};

struct StreamCase {
  size_t streams = 0;
  double events_per_stream = 0;
  std::vector<double> relay_us;                         // every matched event, every stream
  std::vector<double> done_ms;                          // delay of the final [DONE]
  size_t unmatched = 0;                                 // client events not seen upstream (should be 0)
  std::vector<double> direct_ms, gateway_ms, added_ms;  // whole streams, paired
  Summary relay, done, added;
};

struct OverheadReport {
  nlohmann::json engine;
  OverheadOptions options;
  std::vector<LatencyCase> cases;
  std::optional<StreamCase> stream;
  std::vector<std::string> notes;
  double wall_s = 0;
};

// The large request's messages: a chat history of about `bytes` bytes of JSON (pure).
nlohmann::json large_messages(uint64_t bytes);
// A context (tokens, per slot) comfortably holding the large request under the gateway's
// default watermark: for engines the benchmark starts itself.
uint64_t overhead_context(uint64_t large_bytes);

Result<OverheadReport> run_overhead(const Endpoint& engine, const OverheadOptions& options,
                                    const ProgressFn& progress = {});

Status write_overhead(const OverheadReport& report, OutputDir& out);
std::string overhead_text(const OverheadReport& report);
nlohmann::json to_json(const OverheadReport& report);

}  // namespace kvgate::bench
