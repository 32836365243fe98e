#include "bench/cliff.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

namespace kvgate::bench {
namespace {

// Throughput of a model whose time per token is 0.5 ms + 0.0001 ms per token of context:
// the smooth fall every attention model shows (at 128k, 13.6 ms per token: 27x slower).
double smooth(uint64_t n) { return 1000.0 / (0.5 + 0.0001 * static_cast<double>(n)); }

std::vector<ThroughputPoint> sweep(double (*tps)(uint64_t), double factor_from_96k = 1.0) {
  std::vector<ThroughputPoint> out;
  for (uint64_t n : {4096U, 6144U, 8192U, 12288U, 16384U, 24576U, 32768U, 49152U, 65536U, 98304U, 131072U}) {
    out.push_back({n, tps(n) * (n >= 98304 ? factor_from_96k : 1.0)});
  }
  return out;
}

TEST(CliffTest, FitRecoversALinearTimePerToken) {
  const auto points = sweep(smooth);
  const TrendFit fit = fit_trend(points);
  EXPECT_NEAR(fit.base_ms, 0.5, 1e-9);
  EXPECT_NEAR(fit.per_token_ms, 0.0001, 1e-12);
  EXPECT_NEAR(fit.tokens_per_s(10000), 1000.0 / 1.5, 1e-6);
}

TEST(CliffTest, SmoothAttentionSlowdownIsNoCliff) {
  const auto r = detect_cliff(sweep(smooth));
  EXPECT_FALSE(r.cliff.has_value()) << r.explanation;
  EXPECT_EQ(r.last_good_tokens, 131072U);
  // 80% of 131072 = 104857.6, rounded down to a multiple of 256.
  EXPECT_EQ(r.safe_cap_tokens, 104704U);
  EXPECT_NE(r.explanation.find("no cliff up to 131072"), std::string::npos) << r.explanation;
}

TEST(CliffTest, TenfoldCollapseIsFoundAtItsFirstSize) {
  const auto r = detect_cliff(sweep(smooth, 0.1));
  ASSERT_TRUE(r.cliff.has_value()) << r.explanation;
  EXPECT_EQ(r.sorted[*r.cliff].tokens, 98304U);
  EXPECT_EQ(r.last_good_tokens, 65536U);
  // 80% of 65536 = 52428.8 -> 52428 -> 204 * 256.
  EXPECT_EQ(r.safe_cap_tokens, 52224U);
  EXPECT_NEAR(r.trend_tokens_per_s[*r.cliff], smooth(98304), 1e-6);
  EXPECT_NE(r.explanation.find("cliff at 98304"), std::string::npos) << r.explanation;
  EXPECT_EQ(to_json(r)["cliff_tokens"], 98304);
}

TEST(CliffTest, TheFractionDecides) {
  EXPECT_FALSE(detect_cliff(sweep(smooth, 0.6)).cliff.has_value());  // 40% below the trend: within 0.5
  EXPECT_TRUE(detect_cliff(sweep(smooth, 0.4)).cliff.has_value());   // 60% below
  CliffOptions strict;
  strict.fraction = 0.7;
  EXPECT_TRUE(detect_cliff(sweep(smooth, 0.6), strict).cliff.has_value());
}

TEST(CliffTest, NoiseIsNoCliff) {
  auto points = sweep(smooth);
  for (size_t i = 0; i < points.size(); ++i) points[i].tokens_per_s *= (i % 2 == 0 ? 1.12 : 0.88);
  EXPECT_FALSE(detect_cliff(points).cliff.has_value());
}

TEST(CliffTest, OrderAndTooFewPoints) {
  std::vector<ThroughputPoint> two = {{8192, 100}, {4096, 120}};
  const auto r = detect_cliff(two);
  EXPECT_FALSE(r.cliff.has_value());
  EXPECT_EQ(r.sorted.front().tokens, 4096U);
  EXPECT_NE(r.explanation.find("too few sizes"), std::string::npos) << r.explanation;
  // Unsorted input with a cliff: found all the same.
  auto points = sweep(smooth, 0.1);
  std::swap(points[0], points[10]);
  std::swap(points[3], points[7]);
  const auto s = detect_cliff(points);
  ASSERT_TRUE(s.cliff.has_value());
  EXPECT_EQ(s.sorted[*s.cliff].tokens, 98304U);
  EXPECT_TRUE(detect_cliff(std::vector<ThroughputPoint>{}).explanation.find("no sizes") != std::string::npos);
}

TEST(CliffTest, CapOptions) {
  CliffOptions o;
  o.cap_fraction = 0.64;
  o.cap_round = 1000;
  const auto r = detect_cliff(sweep(smooth, 0.1), o);
  EXPECT_EQ(r.safe_cap_tokens, 41000U);  // 0.64 * 65536 = 41943 -> 41000
}

}  // namespace
}  // namespace kvgate::bench
