// The probe over the ik_llama.cpp record (tests/fixtures/ik/probes.txt, recorded from a real
// ik build by scripts/record-ik-fixtures.sh) replayed by a ProbeRunner, and through real
// processes for binaries that are not llama-servers (sh scripts, or .cmd files on Windows). The
// pinned engine is probed in probe_e2e_test.cc, a real ik build (when present) in
// ik_probe_e2e_test.cc.
#include "engine/probe.h"

#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "plan/launch_args.h"
#include "testing/paths.h"

namespace kvgate::engine {
namespace {

namespace fs = std::filesystem;

// A stand-in program in `dir`: an sh script, or on Windows a .cmd file (CreateProcess runs
// those through cmd.exe).
fs::path stand_in(const fs::path& dir, const std::string& name, const std::string& sh,
                  const std::string& cmd) {
#ifdef _WIN32
  const fs::path p = dir / (name + ".cmd");
  std::ofstream(p, std::ios::binary) << "@echo off\r\n" << cmd;
  (void)sh;
#else
  const fs::path p = dir / name;
  std::ofstream(p) << "#!/bin/sh\n" << sh;
  fs::permissions(p, fs::perms::owner_all);
  (void)cmd;
#endif
  return p;
}

plan::ProbeRecord ik_record() {
  std::ifstream in(fs::path(kvgate::testing::source_dir()) / "tests/fixtures/ik/probes.txt");
  std::stringstream ss;
  ss << in.rdbuf();
  auto rec = plan::parse_probe_record(ss.str());
  EXPECT_TRUE(rec.ok()) << rec.error().message();
  return rec.ok() ? *rec : plan::ProbeRecord{};
}

// Answers each probe with the recorded outcome and counts the runs; a probe the record lacks
// is an error naming the script that re-records it.
class ReplayRunner final : public ProbeRunner {
 public:
  explicit ReplayRunner(plan::ProbeRecord record) : record_(std::move(record)) {}
  Result<plan::ProbeOutcome> run(const fs::path&, const std::vector<std::string>& args, size_t) override {
    ++runs;
    const std::string key = fmt::format("{}", fmt::join(args, " "));
    auto it = record_.runs.find(key);
    if (it == record_.runs.end()) {
      return Error(
          fmt::format("the ik record has no run '{}': re-record tests/fixtures/ik with "
                      "scripts/record-ik-fixtures.sh",
                      key));
    }
    return it->second;
  }
  size_t runs = 0;

 private:
  plan::ProbeRecord record_;
};

class ProbeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           fmt::format("kvgate_probe_{}_{}", ::getpid(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "bin");
    // Only its path, mtime and size matter: the ReplayRunner answers for it, it never runs.
    std::ofstream(bin()) << "#!/bin/sh\necho 'a stand-in for the recorded ik build: never run' >&2\nexit 1\n";
    fs::permissions(bin(), fs::perms::owner_all);
    false_ = stand_in(dir_ / "bin", "false", "exit 1\n", "exit /b 1\r\n");
    true_ = stand_in(dir_ / "bin", "true", "exit 0\n", "exit /b 0\r\n");  // exits 0 for everything
    fs::copy_file(fs::path(kvgate::testing::source_dir()) / "tests/fixtures/ik/help.txt",
                  dir_ / "bin/help.txt");
  }
  void TearDown() override { fs::remove_all(dir_); }
#ifdef _WIN32
  fs::path bin() const { return dir_ / "bin/llama-server.exe"; }
#else
  fs::path bin() const { return dir_ / "bin/llama-server"; }
#endif
  ProbeOptions options(ProbeRunner* runner = nullptr) {
    return {.cache_dir = dir_ / "cache", .runner = runner};
  }

  fs::path dir_, false_, true_;
};

TEST_F(ProbeTest, IkRecordIsProbedCachedAndReprobedWhenChanged) {
  ReplayRunner runner(ik_record());
  auto first = probe_server(bin(), options(&runner));
  ASSERT_TRUE(first.ok()) << first.error().message();
  EXPECT_FALSE(first->from_cache);
  EXPECT_EQ(first->caps.fork, plan::Fork::kIk);
  EXPECT_EQ(first->caps.build, 4840u);
  EXPECT_EQ(first->caps.commit, "8337e4cd3");
  EXPECT_EQ(first->caps.binary, fs::canonical(bin()).string());
  const size_t runs = runner.runs;
  EXPECT_EQ(runs, 2 + plan::flag_probes().size());  // --version, --help, one per probe

  auto second = probe_server(bin(), options(&runner));
  ASSERT_TRUE(second.ok()) << second.error().message();
  EXPECT_TRUE(second->from_cache);
  EXPECT_EQ(runner.runs, runs);  // nothing ran
  EXPECT_EQ(second->caps.accepted, first->caps.accepted);

  // A rebuilt binary (new mtime) is probed again.
  fs::last_write_time(bin(), fs::last_write_time(bin()) + std::chrono::seconds(5));
  auto third = probe_server(bin(), options(&runner));
  ASSERT_TRUE(third.ok());
  EXPECT_FALSE(third->from_cache);
  EXPECT_EQ(runner.runs, 2 * runs);
}

TEST_F(ProbeTest, SeedConfigurationThroughTheIkRecord) {
  ReplayRunner runner(ik_record());
  auto probed = probe_server(bin(), options(&runner));
  ASSERT_TRUE(probed.ok()) << probed.error().message();
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
  const std::string line = plan::redacted_command_line(*args);
  EXPECT_NE(line.find("-cram 8192 -crs 0.50 -cram-n-min 32 --context-shift on -to 1800"), std::string::npos)
      << line;
  EXPECT_NE(line.find("-fa on"), std::string::npos) << line;

  s.cache_reuse = 256;  // mainline-only: a clear error, not an unknown argument at launch
  auto bad = plan::launch_args(s, probed->caps);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("error: unknown argument: --cache-reuse"), std::string::npos)
      << bad.error().message();
}

TEST_F(ProbeTest, NotALlamaServer) {
  auto f = probe_server(false_, options());
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.error().message().find("is this a llama-server binary?"), std::string::npos)
      << f.error().message();
  auto t = probe_server(true_, options());
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().message().find("accepts the made-up flag"), std::string::npos) << t.error().message();
  auto missing = probe_server(dir_ / "no-such-binary", options());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message().find("cannot resolve"), std::string::npos);
  auto not_exec = probe_server(dir_ / "bin/help.txt", options());
  ASSERT_FALSE(not_exec.ok());
  EXPECT_NE(not_exec.error().message().find("is not an executable file"), std::string::npos);
}

TEST_F(ProbeTest, HangingBinaryTimesOut) {
  const fs::path hang = stand_in(dir_ / "bin", "hang", "exec sleep 30\n", ":again\r\ngoto again\r\n");
  SubprocessProbeRunner runner(std::chrono::milliseconds(300));
  const auto start = std::chrono::steady_clock::now();
  auto r = runner.run(hang, {"--version"}, 5);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("did not exit within 300 ms"), std::string::npos) << r.error().message();
  // Ended at the time-out, well before the script's 30 s (a loaded machine runs late).
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

}  // namespace
}  // namespace kvgate::engine
