// `kvgate unit` through the real kvgate binary; the systemd unit is checked by systemd itself.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "testing/cli_test_support.h"
#include "testing/paths.h"

namespace kvgate::cli {
namespace {

using testing::Ran;

namespace fs = std::filesystem;

const std::string kKvgate = kvgate::testing::kvgate_path();

// Runs a command line; this build's kvgate through testing::run_kvgate (behind the emulator of
// a cross build).
Ran run(std::vector<std::string> argv) {
  if (!argv.empty() && argv[0] == kKvgate) return testing::run_kvgate({argv.begin() + 1, argv.end()});
  return testing::run_command(std::move(argv));
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class UnitCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           fmt::format("kvgate_unit_{}_{}", ::getpid(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    model_ = dir_ / "model.gguf";
    std::ofstream(model_) << "x";
    name_ = fmt::format("kvgate-test-{}", ::getpid());
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
  fs::path model_;
  std::string name_;
};

TEST_F(UnitCommandTest, SystemdUnitPassesSystemdAnalyzeVerify) {
  if (::access("/usr/bin/systemd-analyze", X_OK) != 0) GTEST_SKIP() << "systemd-analyze is not installed";
  const fs::path unit = dir_ / (name_ + ".service");
  Ran made = run({kKvgate, "unit", "systemd", model_.string(), "--ctx", "8k", "--ctk", "q8_0", "--listen",
                  "127.0.0.1:8799", "--on-mismatch", "warn", "--clock-lock", "/bin/true", "--name", name_,
                  "--out", unit.string()});
  ASSERT_EQ(made.code, 0) << made.output;
  const std::string text = slurp(unit);
  const std::string exec = fmt::format(
      "\nExecStart={} up {} --listen 127.0.0.1:8799 --ctx 8k --ctk q8_0 "
      "--on-mismatch warn\n",
      fs::canonical(kKvgate).string(), fs::canonical(model_).string());
  EXPECT_NE(text.find(exec), std::string::npos) << text;
  EXPECT_NE(text.find("\nKillMode=control-group\n"), std::string::npos);
  EXPECT_NE(text.find("\nExecStartPre=-/bin/true\n"), std::string::npos);

  Ran verify = run({"/usr/bin/systemd-analyze", "verify", unit.string()});
  EXPECT_EQ(verify.code, 0) << verify.output << "\n" << text;
  EXPECT_EQ(verify.output, "") << text;

  // The check is real: the same unit with a missing binary fails it.
  std::string broken = text;
  broken.replace(broken.find("ExecStart=") + 10, fs::canonical(kKvgate).string().size(),
                 (dir_ / "missing").string());
  const fs::path bad = dir_ / (name_ + "-broken.service");
  std::ofstream(bad) << broken;
  Ran rejected = run({"/usr/bin/systemd-analyze", "verify", bad.string()});
  EXPECT_NE(rejected.code, 0) << rejected.output;
}

TEST_F(UnitCommandTest, SupervisorProgramRunsUpWithTheOptions) {
  Ran made = run({kKvgate, "unit", "supervisor", model_.string(), "--parallel", "2", "--jetson-clocks",
                  "--name", name_});
  ASSERT_EQ(made.code, 0) << made.output;
  EXPECT_NE(made.output.find(fmt::format("[program:{}]\n", name_)), std::string::npos) << made.output;
  EXPECT_NE(made.output.find(fmt::format("/usr/bin/jetson_clocks || true; exec {} up {} --parallel 2",
                                         fs::canonical(kKvgate).string(), fs::canonical(model_).string())),
            std::string::npos)
      << made.output;
  EXPECT_NE(made.output.find("\nstopasgroup=true\n"), std::string::npos);
  EXPECT_NE(made.output.find("\nenvironment=XDG_CACHE_HOME="), std::string::npos);
}

TEST_F(UnitCommandTest, WindowsTaskIsUtf16ForSchtasks) {
  const fs::path task = dir_ / (name_ + ".xml");
  Ran made = run({kKvgate, "unit", "windows-task", model_.string(), "--name", name_, "--out", task.string()});
  ASSERT_EQ(made.code, 0) << made.output;
  const std::string bytes = slurp(task);
  ASSERT_GE(bytes.size(), 4u);
  EXPECT_EQ(bytes.substr(0, 2), "\xFF\xFE") << "a UTF-16LE byte-order mark";
  // Every other byte of ASCII text in UTF-16LE is zero; the text itself reads back.
  std::string ascii;
  for (size_t i = 2; i + 1 < bytes.size(); i += 2) {
    EXPECT_EQ(bytes[i + 1], '\0') << "at " << i;
    ascii += bytes[i];
  }
  EXPECT_NE(ascii.find("<Command>cmd.exe</Command>"), std::string::npos) << ascii;
  EXPECT_NE(ascii.find(fs::canonical(model_).string()), std::string::npos) << ascii;
  EXPECT_NE(ascii.find(name_ + "-task.log"), std::string::npos) << ascii;
}

TEST_F(UnitCommandTest, TheNameIsAPlainWord) {
  for (const char* name : {"..\\..\\evil", "a/b", "my--gate", "-x", "a b", "x&y", ""}) {
    Ran bad = run({kKvgate, "unit", "windows-task", model_.string(), "--name", name});
    EXPECT_EQ(bad.code, 2) << name << ": " << bad.output;
    EXPECT_NE(bad.output.find("--name"), std::string::npos) << bad.output;
  }
  EXPECT_EQ(run({kKvgate, "unit", "systemd", model_.string(), "--name", "kvgate.qwen-27b_2"}).code, 0);
}

TEST_F(UnitCommandTest, OptionsAreCheckedLikeUp) {
  Ran bad = run({kKvgate, "unit", "systemd", model_.string(), "--ctx", "lots"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.output.find("--ctx 'lots'"), std::string::npos) << bad.output;
  Ran kind = run({kKvgate, "unit", "upstart"});
  EXPECT_EQ(kind.code, 2) << kind.output;
  const fs::path cfg = dir_ / "kvgate.json";
  std::ofstream(cfg) << R"({"ctx": "8k", "typo_option": 1})";
  Ran cfg_bad = run({kKvgate, "unit", "systemd", "--config", cfg.string()});
  EXPECT_EQ(cfg_bad.code, 2);
  EXPECT_NE(cfg_bad.output.find("unknown option \"typo_option\""), std::string::npos) << cfg_bad.output;
}

}  // namespace
}  // namespace kvgate::cli
