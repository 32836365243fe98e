// The engine's own cumulative counters, from llama-server's GET /metrics (started with
// --metrics): prompt tokens it computed, prompt tokens it read from its cache, tokens it
// generated. Their growth over one attempt is what the engine did for it, also when the
// engine refused the attempt's output and its answer (with its figures) was lost. Pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace kvgate::gateway {

struct EngineCounters {
  uint64_t prompt_computed = 0;  // llamacpp:prompt_tokens_total (the cached part excluded)
  uint64_t prompt_cached = 0;    // llamacpp:prompt_tokens_cached_total
  uint64_t generated = 0;        // llamacpp:tokens_predicted_total
  bool cached_known = false;     // ik and older builds do not count reuse
};

// The counters of a /metrics text; nullopt without llamacpp:prompt_tokens_total.
std::optional<EngineCounters> parse_engine_counters(std::string_view metrics_text);

// later - earlier; nullopt when a counter went backwards (the engine restarted between them).
std::optional<EngineCounters> counters_growth(const EngineCounters& earlier, const EngineCounters& later);

}  // namespace kvgate::gateway
