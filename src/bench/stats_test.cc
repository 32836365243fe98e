#include "bench/stats.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

namespace kvgate::bench {
namespace {

TEST(StatsTest, PercentilesInterpolateBetweenClosestRanks) {
  const std::vector<double> v = {4, 1, 3, 2};  // sorted: 1 2 3 4
  EXPECT_DOUBLE_EQ(percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(percentile(v, 100), 4);
  EXPECT_DOUBLE_EQ(percentile(v, 50), 2.5);   // rank 1.5
  EXPECT_DOUBLE_EQ(percentile(v, 95), 3.85);  // rank 2.85
  EXPECT_DOUBLE_EQ(median(v), 2.5);
  std::vector<double> hundred;
  for (int i = 1; i <= 100; ++i) hundred.push_back(i);
  EXPECT_DOUBLE_EQ(percentile(hundred, 99), 99.01);  // rank 98.01
  EXPECT_DOUBLE_EQ(percentile(hundred, 50), 50.5);
}

TEST(StatsTest, EmptyAndNanSamples) {
  const std::vector<double> none;
  EXPECT_TRUE(std::isnan(percentile(none, 50)));
  EXPECT_TRUE(std::isnan(mean(none)));
  const Summary s = summarize(none);
  EXPECT_EQ(s.n, 0U);
  EXPECT_EQ(s.p50, 0);
  const std::vector<double> with_nan = {NAN, 2, NAN, 4};
  EXPECT_DOUBLE_EQ(median(with_nan), 3);
  EXPECT_DOUBLE_EQ(mean(with_nan), 3);
  EXPECT_EQ(summarize(with_nan).n, 2U);
}

TEST(StatsTest, Summary) {
  const std::vector<double> v = {5};
  const Summary one = summarize(v);
  EXPECT_EQ(one.n, 1U);
  EXPECT_EQ(one.p50, 5);
  EXPECT_EQ(one.p99, 5);
  const std::vector<double> w = {10, 0, 5, 5};
  const Summary s = summarize(w);
  EXPECT_EQ(s.min, 0);
  EXPECT_EQ(s.max, 10);
  EXPECT_EQ(s.sum, 20);
  EXPECT_EQ(s.mean, 5);
  EXPECT_EQ(s.p50, 5);
  const auto j = to_json(s);
  EXPECT_EQ(j["n"], 4);
  EXPECT_EQ(j["p50"], 5.0);
}

}  // namespace
}  // namespace kvgate::bench
