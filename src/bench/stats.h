// Descriptive statistics for benchmark samples.
//
// Percentiles use linear interpolation between closest ranks (the definition of numpy's
// default and of R's type 7): for sorted values v[0..n-1] and p in [0, 100], the rank is
// h = (n - 1) * p / 100 and the result v[floor(h)] + (h - floor(h)) * (v[floor(h)+1] - v[floor(h)]).
// So p50 of an even count is the mean of the two middle values, p0 the minimum, p100 the
// maximum. An empty sample has no statistics: the functions return NaN and Summary.n = 0.
#pragma once

#include <cstddef>
#include <span>

#include <nlohmann/json.hpp>

namespace kvgate::bench {

// REQUIRES: 0 <= p <= 100. NaN for an empty sample; NaN values in the input are ignored.
double percentile(std::span<const double> values, double p);
double median(std::span<const double> values);
double mean(std::span<const double> values);

struct Summary {
  size_t n = 0;
  double min = 0, max = 0, mean = 0, p50 = 0, p95 = 0, p99 = 0, sum = 0;
};
// All fields NaN-free when n > 0; all zero when the sample is empty.
Summary summarize(std::span<const double> values);
nlohmann::json to_json(const Summary& s);

}  // namespace kvgate::bench
