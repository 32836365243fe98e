#include "bench/cliff.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace kvgate::bench {

double TrendFit::tokens_per_s(uint64_t n) const {
  const double ms = ms_per_token(n);
  return ms <= 0 ? std::numeric_limits<double>::infinity() : 1000.0 / ms;
}

TrendFit fit_trend(std::span<const ThroughputPoint> points) {
  // Least squares for y = a + b*x with x = tokens, y = ms per token.
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  size_t n = 0;
  for (const auto& p : points) {
    if (!(p.tokens_per_s > 0) || !std::isfinite(p.tokens_per_s)) continue;
    const double x = static_cast<double>(p.tokens);
    const double y = 1000.0 / p.tokens_per_s;
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
    ++n;
  }
  TrendFit fit;
  if (n == 0) return fit;
  const double dn = static_cast<double>(n);
  const double denom = dn * sxx - sx * sx;
  if (n == 1 || std::abs(denom) < 1e-12 * std::max(1.0, sxx * dn)) {
    fit.base_ms = sy / dn;  // one size: a flat trend
    return fit;
  }
  double b = (dn * sxy - sx * sy) / denom;
  double a = (sy - b * sx) / dn;
  if (b < 0) {  // faster with more context: noise; the trend is flat
    b = 0;
    a = sy / dn;
  } else if (a < 0) {  // all cost from attention: a line through the origin
    a = 0;
    b = sxy / sxx;
  }
  fit.base_ms = a;
  fit.per_token_ms = b;
  return fit;
}

CliffResult detect_cliff(std::span<const ThroughputPoint> points, const CliffOptions& options) {
  CliffResult r;
  for (const auto& p : points) {
    const bool seen =
        std::any_of(r.sorted.begin(), r.sorted.end(), [&](const auto& q) { return q.tokens == p.tokens; });
    if (!seen) r.sorted.push_back(p);
  }
  std::stable_sort(r.sorted.begin(), r.sorted.end(),
                   [](const auto& a, const auto& b) { return a.tokens < b.tokens; });
  const auto& v = r.sorted;
  r.trend_tokens_per_s.assign(v.size(), std::numeric_limits<double>::quiet_NaN());
  const size_t min_fit = std::max<size_t>(1, options.min_fit_points);
  for (size_t i = min_fit; i < v.size() && !r.cliff; ++i) {
    const TrendFit fit = fit_trend(std::span(v).first(i));
    const double expected = fit.tokens_per_s(v[i].tokens);
    r.trend_tokens_per_s[i] = expected;
    if (v[i].tokens_per_s < options.fraction * expected) {
      r.cliff = i;
      r.trend = fit;
    }
  }
  if (v.empty()) {
    r.explanation = "no sizes were measured";
    return r;
  }
  if (!r.trend) r.trend = fit_trend(v);
  const size_t good = r.cliff ? *r.cliff - 1 : v.size() - 1;
  r.last_good_tokens = v[good].tokens;
  const uint64_t round = std::max<uint64_t>(1, options.cap_round);
  const auto cap =
      static_cast<uint64_t>(std::floor(static_cast<double>(r.last_good_tokens) * options.cap_fraction));
  r.safe_cap_tokens = cap / round * round;
  if (r.cliff) {
    const auto& c = v[*r.cliff];
    r.explanation = fmt::format(
        "cliff at {} tokens: {:.0f} tokens/s, {:.0f}% of the {:.0f} tokens/s the trend of the smaller sizes "
        "predicts "
        "(threshold {:.0f}%); safe cap {} tokens ({:.0f}% of {})",
        c.tokens, c.tokens_per_s, 100.0 * c.tokens_per_s / r.trend_tokens_per_s[*r.cliff],
        r.trend_tokens_per_s[*r.cliff], 100.0 * options.fraction, r.safe_cap_tokens,
        100.0 * options.cap_fraction, r.last_good_tokens);
  } else if (v.size() <= min_fit) {
    r.explanation =
        fmt::format("too few sizes to judge a cliff (need more than {}); safe cap {} tokens ({:.0f}% of {})",
                    min_fit, r.safe_cap_tokens, 100.0 * options.cap_fraction, r.last_good_tokens);
  } else {
    r.explanation = fmt::format(
        "no cliff up to {} tokens (every size within {:.0f}% of its trend); safe cap {} tokens ({:.0f}% of "
        "the "
        "largest size measured, so measure larger sizes to know more)",
        r.last_good_tokens, 100.0 * options.fraction, r.safe_cap_tokens, 100.0 * options.cap_fraction);
  }
  return r;
}

nlohmann::json to_json(const CliffResult& r) {
  nlohmann::json trend = nullptr;
  if (r.trend)
    trend = {{"base_ms_per_token", r.trend->base_ms}, {"ms_per_token_per_token", r.trend->per_token_ms}};
  return {{"cliff_tokens", r.cliff ? nlohmann::json(r.sorted[*r.cliff].tokens) : nlohmann::json(nullptr)},
          {"cliff_tokens_per_s",
           r.cliff ? nlohmann::json(r.sorted[*r.cliff].tokens_per_s) : nlohmann::json(nullptr)},
          {"trend_tokens_per_s_at_cliff",
           r.cliff ? nlohmann::json(r.trend_tokens_per_s[*r.cliff]) : nlohmann::json(nullptr)},
          {"last_good_tokens", r.last_good_tokens},
          {"safe_cap_tokens", r.safe_cap_tokens},
          {"trend", trend},
          {"explanation", r.explanation}};
}

}  // namespace kvgate::bench
