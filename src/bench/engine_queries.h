// What the benchmarks ask a llama-server directly: its context, its own counters, its
// tokenizer.
//
//   engine_context()  per-slot context from GET /props (mainline: default_generation_settings
//                     .n_ctx; ik: n_ctx / total_slots)
//   engine_counters() the Prometheus counters of a server started with --metrics:
//                     llamacpp:prompt_tokens_total (prompt tokens it computed) and
//                     llamacpp:prompt_tokens_cached_total (prompt tokens it reused); error if
//                     the server has no metrics
//   tokenize()        POST /tokenize (no special tokens added)
//   prompt_tokens()   the prompt a chat request renders to: POST /apply-template (the model's
//                     template, with the request's messages and tools), then POST /tokenize of
//                     that text with its special tokens parsed as such
//   word_bias()       a logit bias (+100) on the tokens of common English words, so that a
//                     random-weight model answers with plain words (its unbiased output is
//                     arbitrary bytes that the engine's output parser may reject)
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/http_client.h"
#include "util/result.h"

namespace kvgate::bench {

Result<uint64_t> engine_context(HttpClient& engine);

struct EngineCounters {
  double processed = 0;  // prompt tokens computed
  double cached = 0;     // prompt tokens reused from the cache
  bool cached_known = false;  // the build exports the reuse counter (ik does not)
};
Result<EngineCounters> engine_counters(HttpClient& engine);
// Parses the two counters out of Prometheus text (missing counters: error).
Result<EngineCounters> parse_engine_counters(std::string_view prometheus_text);

Result<std::vector<int64_t>> tokenize(HttpClient& engine, std::string_view text);

// `messages` and, when not null, `tools` of a chat request.
Result<uint64_t> prompt_tokens(HttpClient& engine, const nlohmann::json& messages, const nlohmann::json& tools);

Result<nlohmann::json> word_bias(HttpClient& engine);

}  // namespace kvgate::bench
