// kvgate bench prefill: prompt-processing throughput against context size, the cliff, a
// safe context cap, and the second-turn cache check.
//
// For every size n (prompt tokens) and repetition, one POST /completion with a prompt of
// exactly n token ids drawn at random (fresh for every request, from the tokens of common
// English words), `cache_prompt: false` and one generated token; the engine's own
// `timings.prompt_n` / `prompt_ms` give the throughput. Nothing is reused between
// measurements: the cache is disabled and no two prompts share a prefix. A size that does
// not fit the engine's context is measured at the largest that does (noted).
//
// Before the sweep (after one small warm-up request), the cache check sends a prompt A and
// then A + 64 new tokens, both with the cache enabled: the second must reuse at least
// |A| - 1 tokens (the seed's checklist: "prompt cache hit on a second turn").
//
// Results: per-run rows, per-size medians, the cliff (bench/cliff.h) and the report files
// (write_prefill): prefill.csv (one row per size), prefill_runs.csv, prefill.json,
// prefill.svg (throughput against context, log2 axis, trend and cliff marked).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/cliff.h"
#include "bench/http_client.h"
#include "bench/output_dir.h"
#include "bench/progress.h"
#include "util/result.h"

namespace kvgate::bench {

// "512,1024,4k" (a list) or "4k..128k" (a geometric range: each power of two and 1.5x it,
// from the first to the last, both included: 4k 6k 8k 12k ... 96k 128k). Sorted, unique.
Result<std::vector<uint64_t>> parse_context_sizes(std::string_view spec);

struct PrefillOptions {
  std::vector<uint64_t> sizes;  // prompt tokens, ascending
  int reps = 3;
  CliffOptions cliff;
  uint64_t cache_check_tokens = 1024;  // 0: no cache check
  uint64_t seed = 1;
};

struct PrefillRun {
  uint64_t size = 0;
  int rep = 0;
  uint64_t prompt_tokens = 0;  // timings.prompt_n (computed)
  uint64_t cached_tokens = 0;  // timings.cache_n (reused; 0 when the cache is off)
  double prompt_ms = 0;        // timings.prompt_ms
  double tokens_per_s = 0;
  double wall_ms = 0;  // the whole request, seen by the client
};

struct PrefillPoint {
  uint64_t size = 0;
  size_t reps = 0;
  double tokens_per_s = 0;  // median of the runs
  double tokens_per_s_min = 0, tokens_per_s_max = 0;
  double prompt_ms = 0;           // median
  double trend_tokens_per_s = 0;  // what the trend predicted (NaN where none)
};

struct CacheCheck {
  bool ran = false;
  bool passed = false;
  uint64_t first_prompt_tokens = 0;
  uint64_t second_prompt_tokens = 0;
  uint64_t second_cached_tokens = 0;
  std::string detail;
};

struct PrefillReport {
  nlohmann::json engine;  // url, context, command (when started here)
  PrefillOptions options;
  std::vector<PrefillRun> runs;
  std::vector<PrefillPoint> points;
  CliffResult cliff;
  CacheCheck cache;
  std::vector<std::string> notes;
  double wall_s = 0;
};

// Runs the sweep against the engine at `engine` (its context is read from /props).
Result<PrefillReport> run_prefill(HttpClient& engine, const PrefillOptions& options,
                                  const ProgressFn& progress = {});

// Per-size medians and the cliff from the runs (pure; run_prefill uses it).
void summarize_prefill(PrefillReport& report);

Status write_prefill(const PrefillReport& report, OutputDir& out);
std::string prefill_text(const PrefillReport& report);
nlohmann::json to_json(const PrefillReport& report);

// A prefill.json written by write_prefill, reduced to what the status page shows:
// {file, engine, points [{tokens, tokens_per_s, trend_tokens_per_s}], cliff {cliff_tokens,
// safe_cap_tokens, explanation}}. An error names the file and what is wrong with it.
Result<nlohmann::json> load_prefill_summary(const std::string& path);

}  // namespace kvgate::bench
