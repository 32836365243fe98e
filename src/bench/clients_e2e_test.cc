// The family of simulated clients (client_sim.h) through kvgate in front of the pinned engine,
// at a scale CI affords: an 8K context, kTurns turns of kGrowth new tokens (so that each run
// passes the high watermark once or twice), one seed per behaviour (KVGATE_CLIENT_SEEDS, e.g.
// "1,2,3", runs more: each seed of each behaviour costs 40–100 s of engine time), one engine
// per slot count serving the runs in turn. Every run must
// hold kvgate's properties (client_run.h): no failed turn, compactions within the bound,
// prefilled ÷ prompt within 1.5 × the ideal gateway's on the same turns, the request sent
// whole until its conversation needed a compaction, no conversation split into two sessions
// or two merged into one. A failure names the behaviour, the seed,
// the client, the turn and the figures.
//
// The clients send what agents send: no logit bias, so the random-weight model's replies are
// arbitrary text, as they were for the user whose measurement this family reproduces.
#include <chrono>
#include <cstdlib>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "bench/clients.h"
#include "engine/pinned.h"
#include "gguf/synth.h"
#include "plan/fit.h"
#include "util/log.h"

namespace kvgate::bench {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kContext = 8192;
constexpr size_t kTurns = 10;
constexpr uint64_t kGrowth = 800;

class ClientsFixture : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    util::set_log_level(util::LogLevel::kWarn);
    dir_ = new fs::path(fs::temp_directory_path() / fmt::format("kvgate_clients_e2e_{}", ::getpid()));
    fs::remove_all(*dir_);
    fs::create_directories(*dir_);
    auto vocab_path = engine::vocab_file("qwen2");
    ASSERT_TRUE(vocab_path.ok()) << vocab_path.error().message();
    auto vocab = gguf::File::open(*vocab_path);
    ASSERT_TRUE(vocab.ok()) << vocab.error().message();
    auto written = gguf::synthesize(*gguf::synth_defaults("qwen3"), &*vocab, *dir_ / "tiny.gguf");
    ASSERT_TRUE(written.ok()) << written.error().message();
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
    dir_ = nullptr;
  }
  // As `kvgate bench clients --ctx 8k` runs them: chunk reuse on the engine, the gateway's
  // high watermark at the planner's safe cap, the summary after the retained messages.
  static ClientsOptions options(const std::string& behaviours, std::vector<uint64_t> seeds, size_t turns) {
    ClientsOptions o;
    o.engine = {.model = *dir_ / "tiny.gguf", .extra_args = {"-t", "2", "--cache-reuse", "256"}};
    o.context = kContext;
    o.gateway.high_watermark_tokens = plan::safe_cap(static_cast<uint32_t>(kContext));
    o.gateway.compaction_options.summary_after_tail = true;
    o.gateway.engine_shifts = true;
    auto selected = select_behaviours(client_family(kContext, turns), behaviours);
    EXPECT_TRUE(selected.ok()) << selected.error().message();
    if (selected.ok()) o.behaviours = *selected;
    for (auto& b : o.behaviours) b.growth_tokens = kGrowth;
    o.seeds = std::move(seeds);
    o.reuse_engines = true;
    o.turns = turns;
    o.log_dir = *dir_ / behaviours;
    return o;
  }
  static fs::path* dir_;
};
fs::path* ClientsFixture::dir_ = nullptr;

// The seeds to run: KVGATE_CLIENT_SEEDS (comma-separated), or seed 1.
std::vector<uint64_t> family_seeds() {
  const char* env = std::getenv("KVGATE_CLIENT_SEEDS");
  auto seeds = parse_seeds(env != nullptr ? env : "1");
  EXPECT_TRUE(seeds.ok()) << "KVGATE_CLIENT_SEEDS: " << seeds.error().message();
  return seeds.ok() ? *seeds : std::vector<uint64_t>{1};
}

class ClientsE2eTest : public ClientsFixture, public ::testing::WithParamInterface<std::string> {};

std::string figures_line(const ClientRun& run) {
  const RunFigures& f = run.figures;
  return fmt::format("{} seed {}: {}/{} answered, {} compactions (bound {}), prefilled/prompt {:.3f} (bound {:.3f}), "
                     "{} sessions for {} conversations, g {:.0f}, {:.1f} s",
                     run.behaviour, run.seed, f.ok, f.turns, f.compactions, f.compaction_bound, f.prefilled_ratio,
                     f.ratio_bound, f.sessions, f.conversations_started, f.growth, run.wall_s);
}

TEST_P(ClientsE2eTest, PropertiesHoldOnEverySeed) {
  const auto t0 = std::chrono::steady_clock::now();
  const ClientsOptions o = options(GetParam(), family_seeds(), kTurns);
  ASSERT_EQ(o.behaviours.size(), 1U);
  auto report = run_clients(o);
  ASSERT_TRUE(report.ok()) << report.error().message();
  ASSERT_EQ(report->runs.size(), o.seeds.size());
  for (const auto& run : report->runs) {
    // The instrument: every turn was sent and counted.
    ASSERT_EQ(run.turns.size(), kTurns * run.clients);
    for (const auto& t : run.turns) {
      EXPECT_GT(t.client_tokens, 0U) << run.behaviour << " seed " << run.seed << " turn " << t.turn;
      if (!t.new_conversation) {
        EXPECT_GT(t.increment_tokens, 0U) << run.behaviour << " seed " << run.seed << " turn " << t.turn;
      }
    }
    EXPECT_TRUE(run.violations.empty()) << figures_line(run) << "\n" << violations_text(run);
  }
  std::printf("[ clients  ] %s: %.1f s\n", GetParam().c_str(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

INSTANTIATE_TEST_SUITE_P(Family, ClientsE2eTest,
                         ::testing::Values("append", "append-zh", "window-messages", "window-tokens", "window-large",
                                           "tools", "ids", "self-summary", "edits", "pasted", "parallel",
                                           "user-report"),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           std::string name = param.param;
                           for (char& c : name) c = c == '-' ? '_' : c;
                           return name;
                         });

// The instrument itself, straight to the engine: the harness counts a client's request as the
// engine does, an append-only client's increment is what its prompt grew by, and
// tool_choice "required" makes the random-weight model call a tool.
class ClientsInstrumentTest : public ClientsFixture {};

TEST_F(ClientsInstrumentTest, CountsMatchTheEngineAndRequiredToolsAreCalled) {
  ClientsOptions o = options("append,tools", {5}, 4);
  o.direct = true;
  o.through_gateway = false;
  o.plain_words = true;  // words: the engine's output parser accepts every reply
  o.behaviours[1].huge_results = 0;
  o.behaviours[1].tool_turns = 1;
  auto report = run_clients(o);
  ASSERT_TRUE(report.ok()) << report.error().message();
  ASSERT_EQ(report->runs.size(), 2U);
  for (const auto& run : report->runs) {
    uint64_t previous_prompt = 0;
    for (const auto& t : run.turns) {
      ASSERT_TRUE(t.ok()) << run.behaviour << " turn " << t.turn << ": " << t.error;
      EXPECT_EQ(t.client_tokens, t.prompt_tokens) << run.behaviour << " turn " << t.turn;
      if (run.behaviour == "append" && t.turn > 1) {
        EXPECT_EQ(t.increment_tokens, t.prompt_tokens - previous_prompt) << "turn " << t.turn;
      }
      if (run.behaviour == "tools") {
        EXPECT_TRUE(t.asks_tool_call);
        EXPECT_GE(t.tool_calls, 1U) << "turn " << t.turn << ": tool_choice required";
      }
      previous_prompt = t.prompt_tokens;
    }
  }
}

}  // namespace
}  // namespace kvgate::bench
