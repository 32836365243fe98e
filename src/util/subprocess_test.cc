#include "util/subprocess.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <vector>

namespace kvgate::util {
namespace {

// Alive = exists and is not a zombie (a reaped-late orphan is dead for our purposes).
bool process_alive(pid_t pid) {
  FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
  if (f == nullptr) return false;
  char buf[512] = {};
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  const std::string stat(buf, n);
  const size_t close_paren = stat.rfind(')');
  return close_paren != std::string::npos && close_paren + 2 < stat.size() && stat[close_paren + 2] != 'Z';
}

struct Lines {
  std::mutex mu;
  std::vector<std::string> lines;
  std::function<void(std::string_view)> sink() {
    return [this](std::string_view l) {
      std::lock_guard lock(mu);
      lines.emplace_back(l);
    };
  }
};

TEST(SubprocessTest, CapturesBothStreamsAndExitCode) {
  Lines out;
  auto p = Subprocess::spawn({.argv = {"/bin/sh", "-c", "echo one; echo two >&2; printf three; exit 3"},
                              .on_line = out.sink()});
  ASSERT_TRUE(p.ok()) << p.error().message();
  auto status = (*p)->wait_for(std::chrono::seconds(10));
  ASSERT_TRUE(status);
  EXPECT_EQ(status->code, 3);
  (*p)->stop();
  EXPECT_EQ(out.lines, (std::vector<std::string>{"one", "two", "three"}));
}

TEST(SubprocessTest, RemovesAndSetsEnvironment) {
  ::setenv("LLAMA_ARG_CTX_SIZE", "99", 1);
  Lines out;
  auto p = Subprocess::spawn({.argv = {"/bin/sh", "-c", "echo ctx=${LLAMA_ARG_CTX_SIZE:-unset} k=$KVGATE_X"},
                              .unset_env_prefixes = {"LLAMA_ARG_"},
                              .set_env = {{"KVGATE_X", "y"}},
                              .on_line = out.sink()});
  ASSERT_TRUE(p.ok());
  (*p)->wait_for(std::chrono::seconds(10));
  (*p)->stop();
  ::unsetenv("LLAMA_ARG_CTX_SIZE");
  EXPECT_EQ(out.lines, (std::vector<std::string>{"ctx=unset k=y"}));
}

TEST(SubprocessTest, ExecFailureIsAnError) {
  auto p = Subprocess::spawn({.argv = {"/nonexistent/llama-server"}});
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message().find("cannot run '/nonexistent/llama-server'"), std::string::npos);
}

TEST(SubprocessTest, StopKillsTheWholeGroup) {
  Lines out;
  // The child starts a grandchild and prints its pid; stop() must take both down, even
  // though the shell ignores SIGTERM.
  auto p = Subprocess::spawn({.argv = {"/bin/sh", "-c", "trap '' TERM; sleep 300 & echo $!; wait"},
                              .on_line = out.sink()});
  ASSERT_TRUE(p.ok());
  pid_t grandchild = 0;
  for (int i = 0; i < 500 && grandchild == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::lock_guard lock(out.mu);
    if (!out.lines.empty()) grandchild = std::stoi(out.lines[0]);
  }
  ASSERT_GT(grandchild, 0);
  auto status = (*p)->stop(std::chrono::milliseconds(200));
  EXPECT_TRUE(status.signaled());
  // The grandchild was killed with the group; init reaps it a moment later.
  bool gone = false;
  for (int i = 0; i < 3000 && !gone; ++i) {
    gone = !process_alive(grandchild);
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(gone) << "grandchild survived";
}

TEST(SubprocessTest, StopReachesAStoppedChildWithSigterm) {
  // A SIGSTOPped child (a hung engine, as the supervisor sees it) acts on SIGTERM only once
  // continued: stop() must end it with SIGTERM well before the grace period's SIGKILL.
  auto p = Subprocess::spawn({.argv = {"/bin/sleep", "300"}});
  ASSERT_TRUE(p.ok());
  (*p)->signal_group(SIGSTOP);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const auto start = std::chrono::steady_clock::now();
  auto status = (*p)->stop(std::chrono::seconds(20));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_TRUE(status.signaled());
  EXPECT_EQ(status.signal, SIGTERM);
}

// What a POSIX shell would split, expand or glob is quoted; the rest reads as it is.
TEST(ShellQuote, QuotesOnlyWhatAShellWouldChange) {
  EXPECT_EQ(shell_quote("/usr/bin/llama-server"), "/usr/bin/llama-server");
  EXPECT_EQ(shell_quote("-DGGML_CUDA=ON"), "-DGGML_CUDA=ON");
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(shell_quote("a b"), "'a b'");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  for (const char* special : {"$HOME", "a;b", "~", "*.gguf", "x|y", "`id`", "{\"a\":1}", "86;89", "!x", "a\nb"}) {
    const std::string q = shell_quote(special);
    EXPECT_EQ(q.front(), '\'') << special;
    EXPECT_EQ(q.back(), '\'') << special;
  }
  EXPECT_EQ(shell_command({"cmake", "-S", "/a b"}), "cmake -S '/a b'");
}

// One lookup of programs for every command (engine builds, nvidia-smi, kvgate run's agents).
TEST(SubprocessTest, FindProgramLooksOnPathForAnExecutableFile) {
  const auto sh = find_program("sh");
  ASSERT_TRUE(sh.has_value());
  EXPECT_TRUE(is_executable_file(*sh));
  EXPECT_EQ(find_program("/bin/sh"), std::optional<std::string>("/bin/sh"));  // a path as given
  EXPECT_EQ(find_program("no-such-program-kvgate"), std::nullopt);
  EXPECT_EQ(find_program("/tmp"), std::nullopt);  // a folder is not a program
  const std::string plain = (std::filesystem::temp_directory_path() / "kvgate-find-program-plain").string();
  std::ofstream(plain) << "not a program\n";
  std::filesystem::permissions(plain, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  EXPECT_FALSE(is_executable_file(plain));
  std::filesystem::remove(plain);
}

}  // namespace
}  // namespace kvgate::util
