// The probe against a real ik_llama.cpp build ($KVGATE_IK_SERVER; skipped without one):
// tests/fixtures/ik/probes.txt must be what that build answers to kvgate's probe list today,
// and the command line kvgate spells for it must pass its real argument parser.
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "engine/probe.h"
#include "plan/launch_args.h"
#include "testing/engines_under_test.h"
#include "testing/paths.h"

namespace kvgate::engine {
namespace {

namespace fs = std::filesystem;

// The record with this machine's path of the binary replaced the way the recording script
// does it (the header fields and ik's `usage: PATH [options]` lines).
plan::ProbeRecord neutral(plan::ProbeRecord rec) {
  const std::string path = rec.binary;
  for (auto& [args, outcome] : rec.runs) {
    for (auto& line : outcome.lines) {
      for (size_t at = line.find(path); at != std::string::npos; at = line.find(path, at)) {
        line.replace(at, path.size(), "llama-server");
      }
    }
  }
  rec.binary = "llama-server";
  rec.mtime_ns = 0;
  rec.size = 0;
  return rec;
}

TEST(IkProbeE2eTest, RealBuildMatchesTheRecordedFixture) {
  const auto ik = testing::ik_server_under_test();
  if (!ik) GTEST_SKIP() << testing::kIkAbsent;
  SubprocessProbeRunner runner;
  auto rec = record_probes(*ik, runner);
  ASSERT_TRUE(rec.ok()) << rec.error().message();
  const plan::ProbeRecord fresh = neutral(*rec);
  std::ifstream in(fs::path(kvgate::testing::source_dir()) / "tests/fixtures/ik/probes.txt");
  std::stringstream ss;
  ss << in.rdbuf();
  auto fixture = plan::parse_probe_record(ss.str());
  ASSERT_TRUE(fixture.ok()) << fixture.error().message();
  bool same = fresh.runs.size() == fixture->runs.size();
  for (const auto& [args, outcome] : fresh.runs) {
    auto it = fixture->runs.find(args);
    const bool match = it != fixture->runs.end() && it->second.exit_code == outcome.exit_code &&
                       it->second.lines == outcome.lines;
    EXPECT_TRUE(match) << "probe '" << args << "' differs from the fixture";
    same = same && match;
  }
  if (!same) ADD_FAILURE() << "re-record it: scripts/record-ik-fixtures.sh " << ik->string();
}

TEST(IkProbeE2eTest, SeedCommandLinePassesTheRealParser) {
  const auto ik = testing::ik_server_under_test();
  if (!ik) GTEST_SKIP() << testing::kIkAbsent;
  const fs::path cache = fs::temp_directory_path() / fmt::format("kvgate_ik_probe_e2e_{}", ::getpid());
  auto probed = probe_server(*ik, {.cache_dir = cache});
  fs::remove_all(cache);
  ASSERT_TRUE(probed.ok()) << probed.error().message();
  EXPECT_EQ(probed->caps.fork, plan::Fork::kIk);
  plan::ServerSettings s;
  s.model_path = "/m.gguf";
  s.cache_ram_mib = 8192;
  s.cache_ram_similarity = 0.5;
  s.cache_ram_n_min = 32;
  s.context_shift = true;
  s.timeout_s = 1800;
  s.flash_attn = plan::FlashAttn::kOn;
  auto args = plan::launch_args(s, probed->caps);
  ASSERT_TRUE(args.ok()) << args.error().message();
  // The parser reads left to right and exits at --version: every flag before it was accepted.
  std::vector<std::string> with_version = *args;
  with_version.push_back("--version");
  SubprocessProbeRunner runner;
  auto ran = runner.run(*ik, with_version, 5);
  ASSERT_TRUE(ran.ok()) << ran.error().message();
  EXPECT_EQ(ran->exit_code, 0) << plan::redacted_command_line(*args) << "\n"
                               << (ran->lines.empty() ? "" : ran->lines.front());
}

}  // namespace
}  // namespace kvgate::engine
