#include "bench/stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace kvgate::bench {

namespace {

std::vector<double> sorted_finite(std::span<const double> values) {
  std::vector<double> v;
  v.reserve(values.size());
  for (double x : values) {
    if (!std::isnan(x)) v.push_back(x);
  }
  std::sort(v.begin(), v.end());
  return v;
}

double percentile_sorted(const std::vector<double>& v, double p) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  const double h = static_cast<double>(v.size() - 1) * std::clamp(p, 0.0, 100.0) / 100.0;
  const auto lo = static_cast<size_t>(std::floor(h));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (h - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

}  // namespace

double percentile(std::span<const double> values, double p) {
  return percentile_sorted(sorted_finite(values), p);
}

double median(std::span<const double> values) { return percentile(values, 50); }

double mean(std::span<const double> values) {
  double sum = 0;
  size_t n = 0;
  for (double x : values) {
    if (std::isnan(x)) continue;
    sum += x;
    ++n;
  }
  return n == 0 ? std::numeric_limits<double>::quiet_NaN() : sum / static_cast<double>(n);
}

Summary summarize(std::span<const double> values) {
  const auto v = sorted_finite(values);
  Summary s;
  if (v.empty()) return s;
  s.n = v.size();
  s.min = v.front();
  s.max = v.back();
  for (double x : v) s.sum += x;
  s.mean = s.sum / static_cast<double>(v.size());
  s.p50 = percentile_sorted(v, 50);
  s.p95 = percentile_sorted(v, 95);
  s.p99 = percentile_sorted(v, 99);
  return s;
}

nlohmann::json to_json(const Summary& s) {
  return {{"n", s.n},     {"min", s.min}, {"p50", s.p50},   {"p95", s.p95},
          {"p99", s.p99}, {"max", s.max}, {"mean", s.mean}, {"sum", s.sum}};
}

}  // namespace kvgate::bench
