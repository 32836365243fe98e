// util::Subprocess on Windows, with cmd.exe and this test binary as the children (the POSIX
// side's tests use /bin/sh: subprocess_test.cc).
// <windows.h> first: the headers after it need its types.
// clang-format off
#include <windows.h>
// clang-format on

#include <chrono>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "util/signals.h"
#include "util/subprocess.h"
#include "util/windows_error.h"

namespace kvgate::util {
namespace {

std::string cmd_exe() {
  const auto cmd = find_program("cmd");
  return cmd ? *cmd : std::string("C:\\windows\\system32\\cmd.exe");
}

std::string this_binary() {
  wchar_t path[MAX_PATH];
  const DWORD n = ::GetModuleFileNameW(nullptr, path, MAX_PATH);
  return narrow(std::wstring_view(path, n));
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
  std::string joined() {
    std::lock_guard lock(mu);
    std::string out;
    for (const auto& l : lines) out += l + "|";
    return out;
  }
};

// The child this binary becomes when started with KVGATE_TEST_CHILD=sleep: it waits a minute.
TEST(SubprocessWindowsChild, SleepsWhenAsked) {
  const char* mode = std::getenv("KVGATE_TEST_CHILD");  // NOLINT(concurrency-mt-unsafe)
  if (mode == nullptr || std::string(mode) != "sleep")
    GTEST_SKIP() << "only run as a child of the tests below";
  std::this_thread::sleep_for(std::chrono::seconds(60));
}

TEST(SubprocessWindowsTest, CapturesBothStreamsAndTheExitCode) {
  Lines out;
  auto p = Subprocess::spawn(
      {.argv = {cmd_exe(), "/d", "/c", "echo one& echo two 1>&2& exit 3"}, .on_line = out.sink()});
  ASSERT_TRUE(p.ok()) << p.error().message();
  const auto st = (*p)->wait_for(std::chrono::seconds(30));
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->code, 3);
  EXPECT_FALSE(st->signaled());
  (*p)->stop();
  const std::string text = out.joined();
  EXPECT_NE(text.find("one"), std::string::npos) << text;
  EXPECT_NE(text.find("two"), std::string::npos) << text;
}

TEST(SubprocessWindowsTest, RemovesAndSetsEnvironment) {
  set_env("LLAMA_ARG_CTX_SIZE", "999", true);
  Lines out;
  auto p = Subprocess::spawn({.argv = {cmd_exe(), "/d", "/c", "echo ctx=%LLAMA_ARG_CTX_SIZE% k=%KVGATE_X%"},
                              .unset_env_prefixes = {"LLAMA_ARG_"},
                              .set_env = {{"KVGATE_X", "a b"}},
                              .on_line = out.sink()});
  ASSERT_TRUE(p.ok()) << p.error().message();
  ASSERT_TRUE((*p)->wait_for(std::chrono::seconds(30)).has_value());
  (*p)->stop();
  // cmd.exe leaves an unset variable's %NAME% as it is.
  EXPECT_NE(out.joined().find("ctx=%LLAMA_ARG_CTX_SIZE% k=a b"), std::string::npos) << out.joined();
}

TEST(SubprocessWindowsTest, AMissingProgramIsAnError) {
  auto p = Subprocess::spawn({.argv = {"C:\\no\\such\\program.exe"}});
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message().find("cannot run"), std::string::npos) << p.error().message();
}

TEST(SubprocessWindowsTest, ArgumentsArriveAsGivenWithSpacesQuotesAndUnicode) {
  set_env("KVGATE_TEST_CHILD", "", true);
  Lines out;
  // cmd's echo prints its command line back: the quoting must survive the round trip.
  auto p = Subprocess::spawn({.argv = {cmd_exe(), "/d", "/c", "echo", "a b", "C:\\dir with space\\", "中文"},
                              .on_line = out.sink()});
  ASSERT_TRUE(p.ok()) << p.error().message();
  ASSERT_TRUE((*p)->wait_for(std::chrono::seconds(30)).has_value());
  (*p)->stop();
  EXPECT_NE(out.joined().find("\"a b\""), std::string::npos) << out.joined();
  EXPECT_NE(out.joined().find("\"C:\\dir with space\\\\\""), std::string::npos) << out.joined();
}

TEST(SubprocessWindowsTest, KillEndsTheChildAndReportsTheSignal) {
  auto p =
      Subprocess::spawn({.argv = {this_binary(), "--gtest_filter=SubprocessWindowsChild.SleepsWhenAsked"},
                         .set_env = {{"KVGATE_TEST_CHILD", "sleep"}}});
  ASSERT_TRUE(p.ok()) << p.error().message();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  ASSERT_TRUE((*p)->running());
  const auto start = std::chrono::steady_clock::now();
  (*p)->signal_group(SIGKILL);
  const auto st = (*p)->wait_for(std::chrono::seconds(20));
  ASSERT_TRUE(st.has_value()) << "still running 20 s after SIGKILL";
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  EXPECT_EQ(st->signal, SIGKILL) << st->describe();
  EXPECT_EQ(st->describe(), "killed by signal 9");
}

TEST(SubprocessWindowsTest, StopEndsASleepingChild) {
  auto p =
      Subprocess::spawn({.argv = {this_binary(), "--gtest_filter=SubprocessWindowsChild.SleepsWhenAsked"},
                         .set_env = {{"KVGATE_TEST_CHILD", "sleep"}}});
  ASSERT_TRUE(p.ok()) << p.error().message();
  const auto start = std::chrono::steady_clock::now();
  const ExitStatus st = (*p)->stop(std::chrono::seconds(1));
  EXPECT_TRUE(st.signaled()) << st.describe();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  EXPECT_FALSE((*p)->running());
}

TEST(SubprocessWindowsTest, FindProgramAddsTheEndingsOfPathext) {
  const auto cmd = find_program("cmd");
  ASSERT_TRUE(cmd.has_value());
  EXPECT_TRUE(is_executable_file(*cmd)) << *cmd;
  EXPECT_FALSE(find_program("no-such-program-anywhere").has_value());
}

}  // namespace
}  // namespace kvgate::util
