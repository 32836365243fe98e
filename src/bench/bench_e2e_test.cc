// The three benchmarks end to end on the pinned engine and a tiny synthesized model: they
// run, write their files, and their numbers agree with the engine's own counters.
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "bench/engine_queries.h"
#include "bench/local_engine.h"
#include "bench/overhead.h"
#include "bench/prefill.h"
#include "bench/replay.h"
#include "gguf/synth.h"
#include "testing/engine_e2e.h"
#include "testing/engines_under_test.h"
#include "testing/paths.h"
#include "util/log.h"

namespace kvgate::bench {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

size_t lines(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += c == '\n' ? 1 : 0;
  return n;
}

class BenchE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    util::set_log_level(util::LogLevel::kWarn);
    dir_ = new fs::path(fs::temp_directory_path() / fmt::format("kvgate_bench_e2e_{}", ::getpid()));
    fs::remove_all(*dir_);
    fs::create_directories(*dir_);
    auto m = testing::TempModel::synthesize(*gguf::synth_defaults("qwen3"), "bench");
    ASSERT_TRUE(m.ok()) << m.error().message();
    model_ = new testing::TempModel(std::move(*m));
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
    delete model_;
  }
  static fs::path model() { return model_->path(); }
  static fs::path out(const std::string& name) { return *dir_ / name; }
  static std::unique_ptr<LocalEngine> engine(uint64_t context) {
    auto e = LocalEngine::start(
        {.model = model(), .context = context, .extra_args = {"-t", testing::engine_threads()}});
    EXPECT_TRUE(e.ok()) << e.error().message();
    return e.ok() ? std::move(*e) : nullptr;
  }
  static fs::path* dir_;
  static testing::TempModel* model_;
};
fs::path* BenchE2eTest::dir_ = nullptr;
testing::TempModel* BenchE2eTest::model_ = nullptr;

TEST_F(BenchE2eTest, PrefillMeasuresExactlyTheSizesAskedWithoutCache) {
  auto e = engine(2048);
  ASSERT_NE(e, nullptr);
  HttpClient admin(e->endpoint());
  auto before = engine_counters(admin);
  ASSERT_TRUE(before.ok()) << before.error().message();

  PrefillOptions o{.sizes = {256, 512, 1024, 3000}, .reps = 2, .cache_check_tokens = 256};
  HttpClient client(e->endpoint());
  size_t last_done = 0, calls = 0;
  auto r = run_prefill(client, o, [&](size_t done, size_t total, std::string_view) {
    EXPECT_LE(done, total);
    EXPECT_GE(done, last_done);
    last_done = done;
    ++calls;
  });
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_GT(calls, 8U);
  auto after = engine_counters(admin);
  ASSERT_TRUE(after.ok());

  // 3000 tokens do not fit a 2048 context: measured at the largest prompt that does.
  EXPECT_EQ(r->options.sizes, (std::vector<uint64_t>{256, 512, 1024, 2044}));
  ASSERT_EQ(r->notes.size(), 1U);
  EXPECT_NE(r->notes[0].find("3000 tokens do not fit"), std::string::npos);
  ASSERT_EQ(r->runs.size(), 8U);
  double measured = 0;
  for (const auto& run : r->runs) {
    EXPECT_EQ(run.prompt_tokens, run.size) << "the engine computed every prompt token";
    EXPECT_EQ(run.cached_tokens, 0U) << "nothing was reused";
    EXPECT_GT(run.tokens_per_s, 0);
    EXPECT_GE(run.wall_ms, run.prompt_ms);
    measured += static_cast<double>(run.prompt_tokens);
  }
  // The engine's own counters: it computed the measured prompts plus the warm-up (128) and
  // the cache check (256, then at least the 64 new tokens), and reused the check's prefix.
  const double processed = after->processed - before->processed;
  EXPECT_GE(processed, measured + 128 + 256 + 64);
  EXPECT_LE(processed, measured + 128 + 256 + 320);
  ASSERT_TRUE(r->cache.ran);
  EXPECT_TRUE(r->cache.passed) << r->cache.detail;
  EXPECT_GE(r->cache.second_cached_tokens, 255U);
  EXPECT_EQ(r->cache.second_prompt_tokens, r->cache.first_prompt_tokens + 64);
  EXPECT_GE(after->cached - before->cached, static_cast<double>(r->cache.second_cached_tokens));
  ASSERT_EQ(r->points.size(), 4U);
  EXPECT_GT(r->cliff.safe_cap_tokens, 0U);

  auto dir = OutputDir::open(out("prefill"));
  ASSERT_TRUE(dir.ok());
  ASSERT_TRUE(write_prefill(*r, *dir).ok());
  EXPECT_EQ(lines(slurp(out("prefill") / "prefill.csv")), 5U);
  EXPECT_EQ(lines(slurp(out("prefill") / "prefill_runs.csv")), 9U);
  const json j = json::parse(slurp(out("prefill") / "prefill.json"));
  EXPECT_EQ(j["points"].size(), 4U);
  EXPECT_EQ(j["cache_check"]["passed"], true);
  const std::string svg = slurp(out("prefill") / "prefill.svg");
  EXPECT_EQ(svg.rfind("<svg", 0), 0U);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
}

TEST_F(BenchE2eTest, ReplayDirectVsGatewayOnASmallContext) {
  auto trace = load_trace(fs::path(kvgate::testing::source_dir()) / "tests/fixtures/traces/agent-timestamp.jsonl.zst", 6);
  ASSERT_TRUE(trace.ok()) << trace.error().message();
  constexpr uint64_t kContext = 4096;
  ReplayOptions o;
  o.engine = {.model = model(), .context = kContext, .extra_args = {"-t", testing::engine_threads()}};
  o.max_tokens = 4;
  o.plain_words = true;
  o.gateway.compaction_options.summary_max_tokens = 64;
  o.log_dir = out("replay");
  fs::create_directories(*o.log_dir);
  auto r = run_replay(*trace, o);
  ASSERT_TRUE(r.ok()) << r.error().message();
  const PathResult* direct = r->path("direct");
  const PathResult* gw = r->path("gateway");
  ASSERT_TRUE(direct && gw);
  ASSERT_EQ(direct->turns.size(), 6U);
  ASSERT_EQ(gw->turns.size(), 6U);
  std::printf("%s", replay_text(*r).c_str());

  size_t overflows = 0;
  for (const auto& t : direct->turns) {
    SCOPED_TRACE(fmt::format("direct turn {}: {} {} prompt {}", t.turn, failure_name(t.failure), t.error,
                             t.prompt_tokens));
    // The engine refuses exactly the prompts that do not fit (its own token count).
    if (t.failure == FailureKind::kContextOverflow) {
      ++overflows;
      EXPECT_GE(t.prompt_tokens, kContext);
      EXPECT_EQ(t.engine_processed, 0);
      continue;
    }
    ASSERT_TRUE(t.ok());
    EXPECT_LT(t.prompt_tokens, kContext);
    EXPECT_EQ(t.cached_tokens + t.prefilled_tokens, t.prompt_tokens);
    EXPECT_EQ(t.engine_processed, static_cast<double>(t.prefilled_tokens))
        << "the answer agrees with the engine's counter";
    EXPECT_GE(t.ttft_ms, 0);
    EXPECT_LE(t.ttft_ms, t.total_ms);
    // The clock on the system prompt's first line changed: nothing past it is reusable.
    if (t.turn > 1) {
      EXPECT_LT(t.cached_tokens, 32U);
    }
  }
  EXPECT_GE(overflows, 1U) << "the trace outgrows a 4k context within 6 turns";
  EXPECT_EQ(direct->summary.failures.size(), overflows > 0 ? 1U : 0U);

  uint64_t prefilled_after_first = 0, prompt_after_first = 0;
  for (const auto& t : gw->turns) {
    SCOPED_TRACE(fmt::format("gateway turn {}: {} {}", t.turn, failure_name(t.failure), t.error));
    ASSERT_TRUE(t.ok());
    EXPECT_LT(t.prompt_tokens, kContext);
    EXPECT_EQ(t.cached_tokens + t.prefilled_tokens, t.prompt_tokens);
    // The engine computed what the answer says, plus any compaction summary.
    EXPECT_GE(t.engine_processed, static_cast<double>(t.prefilled_tokens));
    if (t.compactions.empty()) {
      EXPECT_EQ(t.engine_processed, static_cast<double>(t.prefilled_tokens));
    }
    if (t.turn > 1) {
      prefilled_after_first += t.prefilled_tokens;
      prompt_after_first += t.prompt_tokens;
    }
  }
  EXPECT_GE(gw->summary.compactions, 1U);
  EXPECT_EQ(gw->sessions, 1U) << "one conversation, recognised on every turn";
  EXPECT_LT(static_cast<double>(prefilled_after_first), 0.6 * static_cast<double>(prompt_after_first));

  auto dir = OutputDir::open(out("replay"));
  ASSERT_TRUE(dir.ok());
  ASSERT_TRUE(write_replay(*r, *dir).ok());
  EXPECT_EQ(lines(slurp(out("replay") / "replay.csv")), 13U);
  const json j = json::parse(slurp(out("replay") / "replay.json"));
  EXPECT_EQ(j["paths"].size(), 2U);
  EXPECT_TRUE(j.contains("gateway_vs_direct"));
  EXPECT_NE(slurp(out("replay") / "replay.svg").find("</svg>"), std::string::npos);
  EXPECT_TRUE(fs::exists(out("replay") / "engine-direct.log"));
  EXPECT_TRUE(fs::exists(out("replay") / "engine-gateway.log"));
}

TEST_F(BenchE2eTest, OverheadPairsAndEventRelay) {
  OverheadOptions o;
  o.warmup = 1;
  o.reps = 6;
  o.large_bytes = 64 * 1024;
  o.large_reps = 3;
  o.stream_tokens = 12;
  o.stream_reps = 2;
  auto e = engine(overhead_context(o.large_bytes));
  ASSERT_NE(e, nullptr);
  auto r = run_overhead(e->endpoint(), o);
  ASSERT_TRUE(r.ok()) << r.error().message();
  std::printf("%s", overhead_text(*r).c_str());
  ASSERT_EQ(r->cases.size(), 3U);
  const auto& small = r->cases[0];
  const auto& streamed = r->cases[1];
  const auto& large = r->cases[2];
  EXPECT_EQ(small.added_ms.size(), 6U);
  EXPECT_EQ(streamed.added_ms.size(), 6U);
  EXPECT_EQ(large.added_ms.size(), 3U);
  EXPECT_EQ(streamed.prompt_tokens, small.prompt_tokens);
  for (const auto* c : {&small, &streamed, &large}) {
    EXPECT_EQ(c->uncached_pairs, 0U) << c->name << ": both paths served from the engine's cache";
    for (size_t i = 0; i < c->added_ms.size(); ++i) {
      EXPECT_DOUBLE_EQ(c->added_ms[i], c->gateway_ms[i] - c->direct_ms[i]);
      EXPECT_GT(c->direct_ms[i], 0);
    }
  }
  EXPECT_GE(large.request_bytes, 64U * 1024);
  EXPECT_GT(large.prompt_tokens, 20 * small.prompt_tokens);
  ASSERT_TRUE(r->stream.has_value());
  const auto& s = *r->stream;
  EXPECT_EQ(s.streams, 2U);
  EXPECT_EQ(s.unmatched, 0U);
  // Role chunk, one per token, the final chunk and usage (and [DONE], counted apart).
  EXPECT_GE(s.events_per_stream, 14);
  EXPECT_GE(s.relay.n, 2U * 13);
  EXPECT_EQ(s.done.n, 2U);
  for (double us : s.relay_us)
    EXPECT_GE(us, 0) << "an event reached the client before the gateway received it";

  auto dir = OutputDir::open(out("overhead"));
  ASSERT_TRUE(dir.ok());
  ASSERT_TRUE(write_overhead(*r, *dir).ok());
  EXPECT_EQ(lines(slurp(out("overhead") / "overhead.csv")), 1U + 6 + 6 + 3 + 2);
  EXPECT_EQ(json::parse(slurp(out("overhead") / "overhead.json"))["cases"].size(), 3U);
  EXPECT_NE(slurp(out("overhead") / "overhead.svg").find("</svg>"), std::string::npos);
  EXPECT_TRUE(fs::exists(out("overhead") / "overhead_events.csv"));
}

}  // namespace
}  // namespace kvgate::bench
