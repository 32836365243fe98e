// The probe through real processes: the ik argument-parser double (tests/fixtures/ik/
// llama-server, a shell script mimicking ik_llama.cpp's parser because the real ik build is
// not available here), and binaries that are not llama-servers. The pinned engine is probed
// in probe_e2e_test.cc.
#include "engine/probe.h"

#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "plan/launch_args.h"

namespace kvgate::engine {
namespace {

namespace fs = std::filesystem;

size_t count_lines(const fs::path& p) {
  std::ifstream in(p);
  size_t n = 0;
  for (std::string l; std::getline(in, l);) ++n;
  return n;
}

class ProbeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           fmt::format("kvgate_probe_{}_{}", ::getpid(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "bin");
    const fs::path src = fs::path(KVGATE_SOURCE_DIR) / "tests/fixtures/ik";
    fs::copy_file(src / "llama-server", dir_ / "bin/llama-server");
    fs::copy_file(src / "help.txt", dir_ / "bin/help.txt");
    runs_ = dir_ / "runs.txt";
    ::setenv("KVGATE_FAKE_IK_RUNS", runs_.c_str(), 1);
  }
  void TearDown() override {
    ::unsetenv("KVGATE_FAKE_IK_RUNS");
    fs::remove_all(dir_);
  }
  ProbeOptions options() { return {.cache_dir = dir_ / "cache"}; }

  fs::path dir_;
  fs::path runs_;
};

TEST_F(ProbeTest, IkDoubleIsProbedCachedAndReprobedWhenChanged) {
  const fs::path bin = dir_ / "bin/llama-server";
  auto first = probe_server(bin, options());
  ASSERT_TRUE(first.ok()) << first.error().message();
  EXPECT_FALSE(first->from_cache);
  EXPECT_EQ(first->caps.fork, plan::Fork::kIk);
  EXPECT_EQ(first->caps.build, 4840u);
  EXPECT_EQ(first->caps.binary, fs::canonical(bin).string());
  const size_t runs = count_lines(runs_);
  EXPECT_EQ(runs, 2 + plan::flag_probes().size());  // --version, --help, one per probe

  auto second = probe_server(bin, options());
  ASSERT_TRUE(second.ok()) << second.error().message();
  EXPECT_TRUE(second->from_cache);
  EXPECT_EQ(count_lines(runs_), runs);  // nothing ran
  EXPECT_EQ(second->caps.accepted, first->caps.accepted);

  // A rebuilt binary (new mtime) is probed again.
  fs::last_write_time(bin, fs::last_write_time(bin) + std::chrono::seconds(5));
  auto third = probe_server(bin, options());
  ASSERT_TRUE(third.ok());
  EXPECT_FALSE(third->from_cache);
  EXPECT_EQ(count_lines(runs_), 2 * runs);
}

TEST_F(ProbeTest, IkDoubleMatchesTheRecordedFixture) {
  SubprocessProbeRunner runner;
  auto rec = record_probes(dir_ / "bin/llama-server", runner);
  ASSERT_TRUE(rec.ok()) << rec.error().message();
  std::ifstream in(fs::path(KVGATE_SOURCE_DIR) / "tests/fixtures/ik/probes.txt");
  std::stringstream ss;
  ss << in.rdbuf();
  auto fixture = plan::parse_probe_record(ss.str());
  ASSERT_TRUE(fixture.ok());
  EXPECT_EQ(rec->runs.size(), fixture->runs.size());
  for (const auto& [args, outcome] : fixture->runs) {
    auto it = rec->runs.find(args);
    ASSERT_NE(it, rec->runs.end()) << args;
    EXPECT_EQ(it->second.exit_code, outcome.exit_code) << args;
    EXPECT_EQ(it->second.lines, outcome.lines) << args;
  }
}

TEST_F(ProbeTest, SeedConfigurationThroughTheProbedIkDouble) {
  auto probed = probe_server(dir_ / "bin/llama-server", options());
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
  // The double's parser accepts the whole command line: run it with --version appended.
  std::vector<std::string> with_version = *args;
  with_version.push_back("--version");
  SubprocessProbeRunner runner;
  auto ran = runner.run(dir_ / "bin/llama-server", with_version, 5);
  ASSERT_TRUE(ran.ok());
  EXPECT_EQ(ran->exit_code, 0) << plan::redacted_command_line(*args) << "\n" << ran->lines.front();
  const std::string line = plan::redacted_command_line(*args);
  EXPECT_NE(line.find("-cram 8192 -crs 0.50 -cram-n-min 32 --context-shift on -to 1800"), std::string::npos)
      << line;
  EXPECT_NE(line.find("-fa on"), std::string::npos) << line;

  s.cache_reuse = 256;  // mainline-only: a clear error, not an unknown argument at launch
  auto bad = plan::launch_args(s, probed->caps);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("error: unknown argument: --cache-reuse"), std::string::npos);
}

TEST_F(ProbeTest, NotALlamaServer) {
  auto f = probe_server("/bin/false", options());
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.error().message().find("is this a llama-server binary?"), std::string::npos)
      << f.error().message();
  auto t = probe_server("/bin/true", options());  // exits 0 for everything
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
  const fs::path hang = dir_ / "bin/hang";
  std::ofstream(hang) << "#!/bin/sh\nexec sleep 30\n";
  fs::permissions(hang, fs::perms::owner_all);
  SubprocessProbeRunner runner(std::chrono::milliseconds(300));
  const auto start = std::chrono::steady_clock::now();
  auto r = runner.run(hang, {"--version"}, 5);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("did not exit within 300 ms"), std::string::npos) << r.error().message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

}  // namespace
}  // namespace kvgate::engine
