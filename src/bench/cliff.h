// Prefill-throughput cliff detection and the safe context cap it implies.
//
// Prefill of n tokens costs a*n + b*n^2/2 on any attention model (a: the per-token work of
// the weights, b: attention over the tokens before it), so the time per token grows
// linearly with context: s(n) = a + b*n/2. Throughput 1/s(n) therefore falls smoothly with
// context; that is the expected trend, not a cliff. A cliff is a size where the measured
// throughput drops below `fraction` of what that trend predicts, e.g. because the KV cache
// no longer fits fast memory (the seed report's Thor: 10x slower past 64K, without error).
//
// detect_cliff() walks the sizes in increasing order. For each size from the
// (min_fit_points+1)-th on, it fits s(n) = a + b*n by least squares to the sizes before it
// (a, b clamped to >= 0), predicts the throughput there, and reports the first size whose
// measured throughput is below fraction * predicted. The safe cap is cap_fraction of the
// last size before the cliff (of the largest size when there is none), rounded down to a
// multiple of cap_round: the context past which the gateway should compact (its high
// watermark).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kvgate::bench {

struct ThroughputPoint {
  uint64_t tokens = 0;
  double tokens_per_s = 0;  // > 0
};

// Time per token (ms) as a linear function of context: ms(n) = base_ms + per_token_ms * n.
struct TrendFit {
  double base_ms = 0;
  double per_token_ms = 0;
  double ms_per_token(uint64_t n) const { return base_ms + per_token_ms * static_cast<double>(n); }
  double tokens_per_s(uint64_t n) const;  // 1000 / ms_per_token(n); infinity if that is 0
};

// Least-squares fit over the points (at least one). Non-positive throughputs are ignored.
TrendFit fit_trend(std::span<const ThroughputPoint> points);

struct CliffOptions {
  double fraction = 0.5;      // cliff: measured < fraction * trend; in (0, 1)
  size_t min_fit_points = 2;  // sizes needed before the first one that can be judged; >= 1
  double cap_fraction = 0.8;  // safe cap = cap_fraction * last good size; in (0, 1]
  uint64_t cap_round = 256;   // safe cap rounded down to a multiple of this; >= 1
};

struct CliffResult {
  // Indices refer to the points sorted by tokens (sorted() returns that order).
  std::vector<ThroughputPoint> sorted;
  std::vector<double> trend_tokens_per_s;  // the prediction at each point (NaN where none was made)
  std::optional<size_t> cliff;             // first point below fraction * trend
  std::optional<TrendFit> trend;           // fit over the points before the cliff (or all)
  uint64_t last_good_tokens = 0;
  uint64_t safe_cap_tokens = 0;
  std::string explanation;  // one sentence for people
};

// Error-free: with fewer than min_fit_points + 1 points there is simply no judgement (and
// the explanation says so). Duplicate sizes keep the first.
CliffResult detect_cliff(std::span<const ThroughputPoint> points, const CliffOptions& options = {});

nlohmann::json to_json(const CliffResult& r);

}  // namespace kvgate::bench
