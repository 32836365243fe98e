#include "bench/prefill.h"

#include <cmath>

#include <gtest/gtest.h>
#include "testing/paths.h"

namespace kvgate::bench {
namespace {

TEST(PrefillTest, ContextSizeLists) {
  EXPECT_EQ(*parse_context_sizes("512,1024,4k"), (std::vector<uint64_t>{512, 1024, 4096}));
  EXPECT_EQ(*parse_context_sizes("4k,512,4k"), (std::vector<uint64_t>{512, 4096}));  // sorted, unique
  EXPECT_EQ(*parse_context_sizes("2048"), (std::vector<uint64_t>{2048}));
}

TEST(PrefillTest, ContextSizeRanges) {
  EXPECT_EQ(*parse_context_sizes("4k..32k"),
            (std::vector<uint64_t>{4096, 6144, 8192, 12288, 16384, 24576, 32768}));
  // The seed report's pair around the Thor's cliff.
  EXPECT_EQ(*parse_context_sizes("64k..96k"), (std::vector<uint64_t>{65536, 98304}));
  EXPECT_EQ(*parse_context_sizes("4k..4k"), (std::vector<uint64_t>{4096}));
  // Ends off the grid are kept as given.
  EXPECT_EQ(*parse_context_sizes("1000..3000"), (std::vector<uint64_t>{1000, 1024, 1536, 2048, 3000}));
}

TEST(PrefillTest, BadSizes) {
  for (const char* bad : {"", "4k..1k", "abc", "1,,2", "0", "..4k", "4k.."}) {
    auto r = parse_context_sizes(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_NE(r.error().message().find("--ctx"), std::string::npos) << r.error().message();
    }
  }
}

TEST(PrefillTest, SummaryTakesMediansPerSize) {
  PrefillReport r;
  r.options.sizes = {1024, 2048, 4096};
  r.options.reps = 3;
  auto run = [](uint64_t n, double tps) {
    return PrefillRun{.size = n,
                      .prompt_tokens = n,
                      .prompt_ms = 1000.0 * static_cast<double>(n) / tps,
                      .tokens_per_s = tps};
  };
  r.runs = {run(1024, 1000), run(1024, 1200), run(1024, 900), run(2048, 800), run(2048, 850),
            run(2048, 700),  run(4096, 100),  run(4096, 110), run(4096, 90)};
  summarize_prefill(r);
  ASSERT_EQ(r.points.size(), 3U);
  EXPECT_EQ(r.points[0].tokens_per_s, 1000);
  EXPECT_EQ(r.points[0].tokens_per_s_min, 900);
  EXPECT_EQ(r.points[0].tokens_per_s_max, 1200);
  EXPECT_EQ(r.points[1].tokens_per_s, 800);
  EXPECT_EQ(r.points[2].tokens_per_s, 100);
  EXPECT_DOUBLE_EQ(r.points[2].prompt_ms, 1000.0 * 4096 / 100);
  EXPECT_TRUE(std::isnan(r.points[0].trend_tokens_per_s));
  // Time per token 1 ms at 1k, 1.25 ms at 2k: the trend predicts 1.75 ms (571 tokens/s) at
  // 4k; 100 is far below half of it.
  ASSERT_TRUE(r.cliff.cliff.has_value());
  EXPECT_EQ(*r.cliff.cliff, 2U);
  EXPECT_NEAR(r.points[2].trend_tokens_per_s, 1000.0 / 1.75, 1e-6);
  EXPECT_EQ(r.cliff.last_good_tokens, 2048U);
  const auto text = prefill_text(r);
  EXPECT_NE(text.find("<- cliff"), std::string::npos) << text;
  const auto j = to_json(r);
  EXPECT_EQ(j["cliff"]["cliff_tokens"], 4096);
  EXPECT_EQ(j["points"].size(), 3U);
}

TEST(PrefillTest, LoadsASummaryForTheStatusPage) {
  auto s = load_prefill_summary(std::string(kvgate::testing::source_dir()) + "/tests/fixtures/bench/prefill-cliff.json");
  ASSERT_TRUE(s.ok()) << s.error().message();
  ASSERT_EQ((*s)["points"].size(), 4u);
  EXPECT_EQ((*s)["points"][3]["tokens"], 32768);
  EXPECT_EQ((*s)["points"][3]["tokens_per_s"], 380.0);
  EXPECT_EQ((*s)["cliff"]["cliff_tokens"], 32768);
  EXPECT_EQ((*s)["cliff"]["safe_cap_tokens"], 13107);
  EXPECT_FALSE((*s)["points"][0].contains("runs"));  // only what the page draws
  auto missing = load_prefill_summary("/nonexistent/prefill.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message().find("/nonexistent/prefill.json"), std::string::npos);
  const std::string other = std::string(kvgate::testing::source_dir()) + "/tests/fixtures/device/README.md";
  auto not_json = load_prefill_summary(other);
  ASSERT_FALSE(not_json.ok());
  EXPECT_NE(not_json.error().message().find("not the prefill.json"), std::string::npos);
}

}  // namespace
}  // namespace kvgate::bench
