// The probe against the real pinned llama-server.
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "engine/pinned.h"
#include "engine/probe.h"
#include "plan/launch_args.h"
#include "testing/paths.h"

namespace kvgate::engine {
namespace {

namespace fs = std::filesystem;

// tests/fixtures/mainline/probes.txt must be what the pinned engine answers today; if the
// engine changes, this prints the fresh record to put there.
TEST(ProbeE2eTest, PinnedEngineMatchesTheRecordedFixture) {
  auto bin = resolve_server();
  ASSERT_TRUE(bin.ok()) << bin.error().message();
  SubprocessProbeRunner runner;
  auto rec = record_probes(*bin, runner);
  ASSERT_TRUE(rec.ok()) << rec.error().message();
  std::ifstream in(fs::path(kvgate::testing::source_dir()) / "tests/fixtures/mainline/probes.txt");
  std::stringstream ss;
  ss << in.rdbuf();
  auto fixture = plan::parse_probe_record(ss.str());
  ASSERT_TRUE(fixture.ok()) << fixture.error().message();
  bool same = rec->runs.size() == fixture->runs.size();
  for (const auto& [args, outcome] : fixture->runs) {
    auto it = rec->runs.find(args);
    const bool match = it != rec->runs.end() && it->second.exit_code == outcome.exit_code &&
                       it->second.lines == outcome.lines;
    EXPECT_TRUE(match) << "probe '" << args << "' differs from the fixture";
    same = same && match;
  }
  if (!same) {
    plan::ProbeRecord fresh = *rec;
    fresh.binary = "llama-server";
    fresh.mtime_ns = 0;
    fresh.size = 0;
    ADD_FAILURE() << "fresh record:\n" << plan::format_probe_record(fresh);
  }
}

TEST(ProbeE2eTest, PinnedEngineIsMainlineAndCached) {
  auto bin = resolve_server();
  ASSERT_TRUE(bin.ok()) << bin.error().message();
  const fs::path cache = fs::temp_directory_path() / fmt::format("kvgate_probe_e2e_{}", ::getpid());
  fs::remove_all(cache);
  const auto start = std::chrono::steady_clock::now();
  auto first = probe_server(*bin, {.cache_dir = cache});
  const auto probe_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  ASSERT_TRUE(first.ok()) << first.error().message();
  EXPECT_FALSE(first->from_cache);
  EXPECT_EQ(first->caps.fork, plan::Fork::kMainline);
  EXPECT_EQ(first->caps.commit, std::string(kPinnedCommit));
  EXPECT_TRUE(fs::exists(first->cache_file));
  auto second = probe_server(*bin, {.cache_dir = cache});
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(second->from_cache);
  EXPECT_EQ(second->caps.accepted, first->caps.accepted);
  std::printf("probing the pinned engine took %lld ms (%zu flag probes)\n",
              static_cast<long long>(probe_ms.count()), plan::flag_probes().size());

  plan::ServerSettings s;
  s.model_path = "/m.gguf";
  auto args = plan::launch_args(s, second->caps);
  ASSERT_TRUE(args.ok()) << args.error().message();
  const std::string line = plan::redacted_command_line(*args);
  EXPECT_NE(line.find("-lv 4"), std::string::npos) << line;
  EXPECT_NE(line.find("--no-context-shift"), std::string::npos) << line;
  fs::remove_all(cache);
}

}  // namespace
}  // namespace kvgate::engine
