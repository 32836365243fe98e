// The compute-buffer estimate against the pinned CPU engine: over ubatch × context (and
// flash attention on/off, one and four slots) on the synthesized architectures, the
// estimate stays within ±15% of `sched_reserve: CPU compute buffer size`.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include <fmt/format.h>

#include "engine/startup_log.h"
#include "gguf/file.h"
#include "plan/memory_model.h"
#include "plan/model_desc.h"
#include "testing/engine_e2e.h"

namespace kvgate::engine {
namespace {

struct Point {
  uint32_t ubatch;
  uint32_t ctx;
  bool fa = true;
  uint32_t np = 1;
};

class ComputeEstimateE2eTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ComputeEstimateE2eTest, WithinFifteenPercentOfTheEngine) {
  gguf::SynthSpec spec = *gguf::synth_defaults(GetParam());
  if (GetParam() == "llama") {  // a wider model, so the FFN rather than the logits dominates
    spec.n_embd = 512;
    spec.n_ff = 1536;
    spec.n_head = 8;
    spec.head_dim = 64;
  }
  auto model = testing::TempModel::synthesize(spec, "compute_" + GetParam());
  ASSERT_TRUE(model.ok()) << model.error().message();
  auto file = gguf::File::open(model->path());
  ASSERT_TRUE(file.ok());
  auto desc = plan::describe_model(*file);
  ASSERT_TRUE(desc.ok());

  const std::vector<Point> grid = {
      {64, 1024}, {64, 16384}, {256, 4096}, {512, 1024}, {512, 16384}, {1024, 4096}, {2048, 8192},
      {512, 4096, false}, {128, 8192, false}, {512, 8192, true, 4},
  };
  for (const Point& pt : grid) {
    SCOPED_TRACE(fmt::format("-ub {} -c {} -fa {} -np {}", pt.ubatch, pt.ctx, pt.fa ? "on" : "off", pt.np));
    plan::ServerSettings s;
    s.ctx = pt.ctx;
    s.parallel = pt.np;
    s.ubatch = pt.ubatch;
    s.flash_attn = pt.fa ? plan::FlashAttn::kOn : plan::FlashAttn::kOff;
    auto p = plan::plan_memory(*desc, s, {.has_accelerator = false});
    ASSERT_TRUE(p.ok()) << p.error().message();
    auto run = testing::run_engine(model->path(), pt.ctx, static_cast<int>(pt.np),
                                   {"-ub", std::to_string(pt.ubatch), "-fa", pt.fa ? "on" : "off"});
    ASSERT_TRUE(run.ready) << run.error;
    StartupLogParser parser;
    for (const auto& line : run.lines) parser.feed(line);
    ASSERT_EQ(parser.facts().compute_buffers.size(), 1u);
    const double measured = parser.facts().compute_buffers[0].mib;
    const double estimate = static_cast<double>(p->compute_host) / 1048576.0;
    std::printf("compute %-7s -ub %-5u -c %-6u -fa %-3s -np %u: estimate %8.2f MiB, engine %8.2f MiB (%+.1f%%)\n",
                GetParam().c_str(), pt.ubatch, pt.ctx, pt.fa ? "on" : "off", pt.np, estimate, measured,
                100.0 * (estimate - measured) / measured);
    EXPECT_LE(std::fabs(estimate - measured), 0.15 * measured)
        << "estimate " << estimate << " MiB, engine " << measured << " MiB";
  }
}

INSTANTIATE_TEST_SUITE_P(Architectures, ComputeEstimateE2eTest,
                         ::testing::Values("llama", "qwen3", "qwen35", "gemma3"),
                         [](const auto& param_info) { return param_info.param; });

}  // namespace
}  // namespace kvgate::engine
