// `kvgate plan --json` against the real engine, end to end: for each architecture synth
// writes, the plan's own command line starts the pinned llama-server, whose log shows
// exactly the KV and recurrent-state MiB the JSON states; `kvgate doctor` on that log with
// the same options finds nothing, and names the difference when the server is started
// differently.
#include <fstream>
#include <mutex>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <signal.h>

#include "engine/pinned.h"
#include "engine/server_process.h"
#include "engine/startup_log.h"
#include "testing/engine_e2e.h"
#include "testing/engines_under_test.h"
#include "testing/paths.h"
#include "util/subprocess.h"

namespace kvgate::cli {
namespace {

using nlohmann::json;

struct Ran {
  int code = -1;
  std::string output;
};

Ran kvgate(std::vector<std::string> args) {
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
  auto st = (*p)->wait_for(std::chrono::seconds(60));
  (*p)->stop(std::chrono::seconds(1));
  r.code = st ? st->code : -1;
  return r;
}

// Starts the server with `command` (the plan's, without the binary) and returns its log.
std::vector<std::string> run_command(const json& command) {
  std::vector<std::string> args;
  for (size_t i = 1; i < command.size(); ++i) args.push_back(command[i]);
  args.insert(args.end(), {"-t", testing::engine_threads(), "--no-warmup"});
  auto binary = engine::resolve_server();
  EXPECT_TRUE(binary.ok());
  auto server = engine::ServerProcess::start({.binary = *binary, .args = args});
  EXPECT_TRUE(server.ok()) << server.error().message();
  if (!server.ok()) return {};
  auto ready = (*server)->wait_ready(std::chrono::seconds(60));
  EXPECT_TRUE(ready.ok()) << ready.error().message();
  (*server)->signal(SIGKILL);
  (*server)->stop(std::chrono::seconds(5));
  return (*server)->log_lines();
}

std::string two(double v) { return fmt::format("{:.2f}", v); }

class PlanCliE2eTest : public ::testing::TestWithParam<std::string> {};

TEST_P(PlanCliE2eTest, PlanCommandAndDoctorAgreeWithTheEngine) {
  auto model = testing::TempModel::synthesize(*gguf::synth_defaults(GetParam()), "cli_" + GetParam());
  ASSERT_TRUE(model.ok()) << model.error().message();
  const std::vector<std::string> opts = {"--ctx", "6000", "--np", "3", "--ctk", "q8_0", "--ctv", "q4_0", "--no-gpu"};
  std::vector<std::string> plan_args = {"plan", model->path().string(), "--json"};
  plan_args.insert(plan_args.end(), opts.begin(), opts.end());
  Ran planned = kvgate(plan_args);
  ASSERT_EQ(planned.code, 0) << planned.output;
  json j = json::parse(planned.output);

  const auto lines = run_command(j["command"]);
  const engine::StartupFacts f = engine::parse_startup_log([&] {
    std::string text;
    for (const auto& l : lines) text += l + "\n";
    return text;
  }());
  ASSERT_EQ(f.kv_caches.size(), j["kv_caches"].size());
  for (size_t i = 0; i < f.kv_caches.size(); ++i) {
    const json& c = j["kv_caches"][i];
    EXPECT_EQ(plan::cache_role_name(f.kv_caches[i].role), c["role"].get<std::string>());
    EXPECT_EQ(two(f.kv_caches[i].mib), two(c["mib"]));
    EXPECT_EQ(two(f.kv_caches[i].k_mib), two(c["k_mib"]));
    EXPECT_EQ(two(f.kv_caches[i].v_mib), two(c["v_mib"]));
    EXPECT_EQ(f.kv_caches[i].cells, c["cells"]);
    EXPECT_EQ(f.kv_caches[i].type_v, c["type_v"]);
  }
  ASSERT_EQ(f.recurrent.has_value(), !j["recurrent"].is_null());
  if (f.recurrent) {
    EXPECT_EQ(two(f.recurrent->mib), two(j["recurrent"]["mib"]));
    EXPECT_EQ(two(f.recurrent->s_mib), two(j["recurrent"]["s_mib"]));
  }

  const auto log_path = model->path().string() + ".log";
  {
    std::ofstream out(log_path);
    for (const auto& l : lines) out << l << "\n";
  }
  std::vector<std::string> doctor_args = {"doctor", "--log", log_path, "--model", model->path().string(), "--json"};
  doctor_args.insert(doctor_args.end(), opts.begin(), opts.end());
  Ran doctor = kvgate(doctor_args);
  EXPECT_EQ(doctor.code, 0) << doctor.output;
  EXPECT_TRUE(json::parse(doctor.output)["ok"]);

  // The same log against a plan with more context: named, non-zero exit.
  std::vector<std::string> bigger = {"doctor", "--log", log_path, "--model", model->path().string(), "--ctx", "12000",
                                     "--np", "3", "--ctk", "q8_0", "--ctv", "q4_0", "--no-gpu", "--json"};
  Ran mismatch = kvgate(bigger);
  EXPECT_EQ(mismatch.code, 1) << mismatch.output;
  bool smaller = false;
  const json mismatch_json = json::parse(mismatch.output);
  for (const auto& finding : mismatch_json["findings"]) smaller = smaller || finding["code"] == "context_smaller";
  EXPECT_TRUE(smaller) << mismatch.output;
  std::filesystem::remove(log_path);
}

INSTANTIATE_TEST_SUITE_P(Architectures, PlanCliE2eTest, ::testing::Values("llama", "qwen3", "qwen35", "gemma3"),
                         [](const auto& param_info) { return param_info.param; });

}  // namespace
}  // namespace kvgate::cli

namespace kvgate::cli {
namespace {

// --server: the pinned build is probed; its fork, its lack of a GPU and its spelling decide.
TEST(PlanCliServerE2eTest, ProbedBuildDecidesForkOffloadAndSpelling) {
  auto binary = engine::resolve_server();
  ASSERT_TRUE(binary.ok()) << binary.error().message();
  auto model = testing::TempModel::synthesize(*gguf::synth_defaults("qwen3"), "cli_server");
  ASSERT_TRUE(model.ok());
  Ran r = kvgate({"plan", model->path().string(), "--ctx", "8192", "--ctk", "q8_0", "--server", binary->string(),
                  "--json"});
  ASSERT_EQ(r.code, 0) << r.output;
  json j = json::parse(r.output);
  EXPECT_EQ(j["fork"], "mainline");
  EXPECT_EQ(j["offload"]["offloaded"], 0) << "a CPU-only build offloads nothing";
  EXPECT_EQ(j["command"][0], binary->string());
  const std::string line = j["command_line"];
  for (auto flag : {"-c 8192", "-ctk q8_0", "-ctv q8_0", "-lv 4", "-fit off"}) {
    EXPECT_NE(line.find(flag), std::string::npos) << flag << " in " << line;
  }
  Ran wrong_fork = kvgate({"plan", model->path().string(), "--server", binary->string(), "--fork", "ik"});
  EXPECT_EQ(wrong_fork.code, 2) << wrong_fork.output;
}

}  // namespace
}  // namespace kvgate::cli

namespace kvgate::cli {
namespace {

// --weights Q8_0 on an f16 file plans the weights buffer the engine allocates for the q8_0
// file of the same shape (synth writes q8_0 matrices with 1-D tensors and convolution
// kernels F32, as llama-quantize leaves them).
class PlanWeightsE2eTest : public ::testing::TestWithParam<std::string> {};

TEST_P(PlanWeightsE2eTest, Q8_0RecipeIsTheEnginesWeightsBuffer) {
  gguf::SynthSpec f16 = *gguf::synth_defaults(GetParam());
  gguf::SynthSpec q8 = f16;
  q8.weight_type = gguf::GgmlType::Q8_0;
  auto f16_model = testing::TempModel::synthesize(f16, "weights_f16_" + GetParam());
  auto q8_model = testing::TempModel::synthesize(q8, "weights_q8_" + GetParam());
  ASSERT_TRUE(f16_model.ok() && q8_model.ok());
  Ran planned = kvgate({"plan", f16_model->path().string(), "--weights", "Q8_0", "--no-gpu", "--json"});
  ASSERT_EQ(planned.code, 0) << planned.output;
  const json j = json::parse(planned.output);
  ASSERT_EQ(j["components"][0]["name"], "weights");
  const uint64_t weights = j["components"][0]["host_bytes"];
  Ran own = kvgate({"plan", q8_model->path().string(), "--no-gpu", "--json"});
  ASSERT_EQ(own.code, 0) << own.output;
  EXPECT_EQ(json::parse(own.output)["components"][0]["host_bytes"], weights) << "the q8_0 file's own tensor bytes";

  const auto run = testing::run_engine(q8_model->path(), 1024, 1, {});
  ASSERT_TRUE(run.ready) << run.error;
  std::string text;
  for (const auto& l : run.lines) text += l + "\n";
  const engine::StartupFacts f = engine::parse_startup_log(text);
  double cpu = 0;
  for (const auto& b : f.model_buffers) cpu += b.mib;
  ASSERT_GT(cpu, 0) << text;
  EXPECT_EQ(two(cpu), two(static_cast<double>(static_cast<float>(weights) / (1024.0F * 1024.0F))));
}

INSTANTIATE_TEST_SUITE_P(Architectures, PlanWeightsE2eTest, ::testing::Values("qwen3", "qwen35", "gemma3"),
                         [](const auto& param_info) { return param_info.param; });

}  // namespace
}  // namespace kvgate::cli
