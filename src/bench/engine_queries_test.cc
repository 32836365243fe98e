#include "bench/engine_queries.h"

#include <gtest/gtest.h>

#include "bench/local_engine.h"

namespace kvgate::bench {
namespace {

TEST(EngineQueriesTest, ParsesTheEnginesCounters) {
  const std::string text =
      "# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.\n"
      "# TYPE llamacpp:prompt_tokens_total counter\n"
      "llamacpp:prompt_tokens_total 12345\n"
      "# HELP llamacpp:prompt_tokens_cached_total Number of prompt tokens reused.\n"
      "llamacpp:prompt_tokens_cached_total 6.789e+03\n"
      "llamacpp:prompt_tokens_seconds 1234.5\n";
  auto c = parse_engine_counters(text);
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->processed, 12345);
  EXPECT_EQ(c->cached, 6789);
  EXPECT_TRUE(c->cached_known);
  EXPECT_FALSE(parse_engine_counters("llamacpp:tokens_predicted_total 5\n").ok());
}

// ik_llama.cpp 8337e4cd3's /metrics (its first lines): no reuse counter, which is then unknown, not 0.
TEST(EngineQueriesTest, IkCountsNoReuse) {
  const std::string text =
      "llamacpp:prompt_tokens_total 2723\nllamacpp:prompt_seconds_total 0.7\nllamacpp:tokens_predicted_total 12\n"
      "llamacpp:kv_cache_tokens 11\n";
  auto c = parse_engine_counters(text);
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->processed, 2723);
  EXPECT_FALSE(c->cached_known);
}

TEST(EngineQueriesTest, EndpointUrls) {
  auto a = parse_endpoint_url("http://127.0.0.1:8080", "k");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 8080);
  EXPECT_EQ(a->api_key, "k");
  EXPECT_EQ(a->url(), "http://127.0.0.1:8080");
  auto b = parse_endpoint_url("http://[::1]:9/");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->host, "::1");
  for (const char* bad :
       {"https://x:1", "http://x", "http://x:99999", "http://x:80/v1", "x:80", "http://:80", "http://x:8o"}) {
    EXPECT_FALSE(parse_endpoint_url(bad).ok()) << bad;
  }
}

TEST(LocalEngineTest, SplitsEngineArgs) {
  EXPECT_EQ(split_args("  -t 2\t-fa on \n"), (std::vector<std::string>{"-t", "2", "-fa", "on"}));
  EXPECT_TRUE(split_args("").empty());
  EXPECT_TRUE(split_args("   ").empty());
}

}  // namespace
}  // namespace kvgate::bench
