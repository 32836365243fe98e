// `kvgate bench` end to end: each subcommand starts the pinned engine on a tiny model
// (--model), runs with tiny sizes, prints its summary and writes its files.
#include <fstream>
#include <mutex>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "testing/engines_under_test.h"
#include "testing/paths.h"
#include "util/subprocess.h"

namespace kvgate::cli {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

struct Ran {
  int code = -1;
  std::string output;
};

Ran kvgate(std::vector<std::string> args, std::chrono::seconds timeout = std::chrono::seconds(240)) {
  std::vector<std::string> argv = {std::string(kvgate::testing::kvgate_path())};
  argv.insert(argv.end(), args.begin(), args.end());
  Ran r;
  std::mutex mu;
  auto p = util::Subprocess::spawn({.argv = argv, .on_line = [&](std::string_view line) {
                                      std::lock_guard lock(mu);
                                      r.output += std::string(line) + "\n";
                                    }});
  EXPECT_TRUE(p.ok());
  if (!p.ok()) return r;
  auto st = (*p)->wait_for(timeout);
  (*p)->stop(std::chrono::seconds(1));
  r.code = st ? st->code : -1;
  return r;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class BenchCliE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("kvgate_bench_cli_{}", ::getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    model_ = (dir_ / "tiny.gguf").string();
    const Ran synth = kvgate({"synth", "--preset", "tiny-qwen3", "--out", model_});
    ASSERT_EQ(synth.code, 0) << synth.output;
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
  std::string model_;
};

TEST_F(BenchCliE2eTest, Prefill) {
  const auto out = dir_ / "prefill";
  const Ran r = kvgate({"bench", "prefill", "--model", model_, "--ctx", "256,512", "--reps", "1",
                        "--cache-check-tokens", "128", "--engine-args", "-t " + testing::engine_threads(),
                        "--out", out.string()});
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("second-turn cache check: pass"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("safe cap"), std::string::npos) << r.output;
  for (const char* f : {"prefill.csv", "prefill_runs.csv", "prefill.json", "prefill.svg", "engine.log"}) {
    EXPECT_TRUE(fs::exists(out / f)) << f;
  }
  const json j = json::parse(slurp(out / "prefill.json"));
  EXPECT_EQ(j["points"].size(), 2U);
  EXPECT_NE(j["engine"]["command"].get<std::string>().find("-np 1"), std::string::npos);
}

TEST_F(BenchCliE2eTest, Replay) {
  const auto out = dir_ / "replay";
  const std::string trace = std::string(kvgate::testing::source_dir()) + "/tests/fixtures/traces/agent-zh-reasoning.jsonl.zst";
  const Ran r = kvgate({"bench", "replay", trace, "--model", model_, "--ctx", "8k", "--turns", "3",
                        "--plain-words", "--max-tokens", "4", "--live", "--engine-args",
                        "-t " + testing::engine_threads(), "--out", out.string()});
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("replay of agent-zh-reasoning (3 turns, context 8192, live)"), std::string::npos)
      << r.output;
  const json j = json::parse(slurp(out / "replay.json"));
  ASSERT_EQ(j["paths"].size(), 2U);
  for (const auto& p : j["paths"]) {
    EXPECT_EQ(p["turns"].size(), 3U);
    EXPECT_EQ(p["summary"]["ok"], 3) << p.dump(1);
    // From the second turn on, the history carries the model's own replies.
    EXPECT_EQ(p["turns"][1]["live"], true);
    EXPECT_EQ(p["turns"][2]["live"], true);
  }
  EXPECT_TRUE(fs::exists(out / "replay.svg"));
  EXPECT_TRUE(fs::exists(out / "replay.csv"));
}

// The engine SIGKILLed after every 2 turns: through the gateway the turn after each restart
// is served from the conversation's saved state; straight to the engine it is prefilled again.
TEST_F(BenchCliE2eTest, ReplayWithRestarts) {
  const auto out = dir_ / "replay-restarts";
  const std::string trace = std::string(kvgate::testing::source_dir()) + "/tests/fixtures/traces/agent-zh-reasoning.jsonl.zst";
  const Ran r = kvgate({"bench", "replay", trace, "--model", model_, "--ctx", "16k", "--turns", "5",
                        "--restart-every", "2", "--plain-words", "--max-tokens", "4", "--live",
                        "--engine-args", "-t " + testing::engine_threads(), "--out", out.string()});
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("started again after every 2 turns, before turns 3, 5"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("gateway: saved conversation states on"), std::string::npos) << r.output;
  const json j = json::parse(slurp(out / "replay.json"));
  EXPECT_EQ(j["options"]["restart_every"], 2);
  ASSERT_EQ(j["paths"].size(), 2U);
  for (const auto& p : j["paths"]) {
    const std::string name = p["path"];
    EXPECT_EQ(p["summary"]["restart_turns"], json::array({3, 5})) << name;
    ASSERT_EQ(p["turns"].size(), 5U) << name;
    for (const auto& t : p["turns"]) {
      const int turn = t["turn"];
      EXPECT_EQ(t["after_restart"], turn == 3 || turn == 5) << name << " turn " << turn;
      if (!t["after_restart"].get<bool>()) continue;
      ASSERT_EQ(t["result"], "ok") << name << " turn " << turn << ": " << t.dump();
      const uint64_t prompt = t["prompt_tokens"], cached = t["cached_tokens"];
      if (name == "gateway") {
        EXPECT_GT(cached, prompt / 2) << "turn " << turn << " restored from the saved state: " << t.dump();
      } else {
        EXPECT_LT(cached, 64U) << "a fresh engine has nothing cached: " << t.dump();
      }
    }
  }
  EXPECT_EQ(j["paths"][0]["engine_command"].get<std::string>().find("--slot-save-path"), std::string::npos)
      << "the direct path's engine saves nothing";
  EXPECT_NE(j["paths"][1]["engine_command"].get<std::string>().find("--slot-save-path"), std::string::npos);
  EXPECT_NE(slurp(out / "replay.csv").find("after_restart"), std::string::npos);
}

TEST_F(BenchCliE2eTest, Overhead) {
  const auto out = dir_ / "overhead";
  const Ran r = kvgate({"bench",           "overhead",
                        "--model",         model_,
                        "--reps",          "3",
                        "--warmup",        "1",
                        "--large-bytes",   "16KiB",
                        "--large-reps",    "2",
                        "--stream-tokens", "4",
                        "--stream-reps",   "1",
                        "--engine-args",   "-t " + testing::engine_threads(),
                        "--out",           out.string(),
                        "--json"});
  ASSERT_EQ(r.code, 0) << r.output;
  const json j = json::parse(r.output.substr(r.output.find('{')));
  EXPECT_EQ(j["cases"].size(), 3U);
  EXPECT_EQ(j["cases"][0]["pairs"], 3);
  EXPECT_EQ(j["stream"]["streams"], 1);
  EXPECT_TRUE(fs::exists(out / "overhead.svg"));
}

TEST_F(BenchCliE2eTest, UsageErrors) {
  EXPECT_EQ(kvgate({"bench"}).code, 2);
  const Ran no_target = kvgate({"bench", "prefill", "--out", (dir_ / "x").string()});
  EXPECT_EQ(no_target.code, 1);
  EXPECT_NE(no_target.output.find("give either --url"), std::string::npos) << no_target.output;
  const Ran bad_ctx = kvgate({"bench", "prefill", "--url", "http://127.0.0.1:1", "--ctx", "8k..4k"});
  EXPECT_EQ(bad_ctx.code, 1);
  EXPECT_NE(bad_ctx.output.find("--ctx '8k..4k'"), std::string::npos) << bad_ctx.output;
  const Ran no_model = kvgate({"bench", "replay", "trace.jsonl"});
  EXPECT_EQ(no_model.code, 1);
  EXPECT_NE(no_model.output.find("--model FILE is required"), std::string::npos) << no_model.output;
}

}  // namespace
}  // namespace kvgate::cli
