#include "engine/running_instance.h"

#include <atomic>
#include <chrono>
#include <fstream>
#include <string_view>
#include <thread>

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include "engine/process_facts.h"
#include "util/subprocess.h"

namespace kvgate::engine {
namespace {

namespace fs = std::filesystem;

TEST(ParseInstanceDescription, ReadsBothPids) {
  auto r = parse_instance_description(
      "kvgate up (pid 30606) serving /tmp/m.gguf on http://127.0.0.1:48263, engine pid 30688 on port 43785");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->pid, 30606);
  EXPECT_EQ(r->engine_pid, 30688);
  auto early = parse_instance_description("kvgate up (pid 7) serving /m.gguf on http://127.0.0.1:8787");
  ASSERT_TRUE(early.has_value());
  EXPECT_EQ(early->engine_pid, 0);
  EXPECT_FALSE(parse_instance_description("").has_value());
  EXPECT_FALSE(parse_instance_description("kvgate up (pid x)").has_value());
  EXPECT_FALSE(parse_instance_description("something else (pid 5)").has_value());
}

class FakeProc : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::remove_all(root_);
    fs::create_directories(locks_);
  }
  void TearDown() override { fs::remove_all(root_); }

  void process(int pid, std::string_view cmdline, char state, uint64_t rss_kb) {
    const fs::path d = proc_ / std::to_string(pid);
    fs::create_directories(d);
    std::ofstream(d / "cmdline", std::ios::binary) << cmdline;
    std::ofstream(d / "stat") << pid << " (kvgate) " << state << " 1 1 1";
    std::ofstream(d / "status") << "Name:\tkvgate\nVmRSS:\t  " << rss_kb << " kB\nThreads:\t4\n";
  }
  void lock(const std::string& name, const std::string& description) {
    std::ofstream(locks_ / (name + ".lock")) << description << "\n";
  }

  fs::path root_ = fs::temp_directory_path() / ("kvgate_running_" + std::to_string(::getpid()));
  fs::path proc_ = root_ / "proc";
  fs::path locks_ = root_ / "locks";
};

TEST_F(FakeProc, CountsLiveKvgateUpOnceWithItsEngine) {
  using namespace std::string_literals;
  process(100, "/usr/local/bin/kvgate\0up\0--model\0m.gguf\0"s, 'S', 1024);
  process(101, "/opt/llama-server\0-m\0m.gguf\0"s, 'S', 20 * 1024 * 1024);
  const std::string who =
      "kvgate up (pid 100) serving /m.gguf on http://0.0.0.0:11434, engine pid 101 on port 4000";
  lock("listen_0.0.0.0_11434-aaaa", who);
  lock("model__m.gguf-bbbb", who);
  // Stale files: the process is gone, a zombie, or the pid now belongs to something else.
  lock("gone", "kvgate up (pid 200) serving /x.gguf on http://127.0.0.1:1");
  process(300, "/usr/local/bin/kvgate\0up\0"s, 'Z', 0);
  lock("zombie", "kvgate up (pid 300) serving /y.gguf on http://127.0.0.1:2");
  process(400, "/usr/bin/vim\0notes\0"s, 'S', 10);
  lock("reused", "kvgate up (pid 400) serving /z.gguf on http://127.0.0.1:3");
  std::ofstream(locks_ / "empty.lock") << "";

  const auto found = find_running_instances(locks_, proc_);
  ASSERT_EQ(found.size(), 1U);
  EXPECT_EQ(found[0].pid, 100);
  EXPECT_EQ(found[0].engine_pid, 101);
  EXPECT_EQ(found[0].description, who);
  EXPECT_EQ(found[0].resident_bytes, (1024ULL + 20ULL * 1024 * 1024) * 1024);
}

// The real process table (/proc, or Windows' own): what the lock files' pids are checked with.
TEST(ProcessFacts, ThisProcessAndAnExitedChild) {
  const auto self = static_cast<pid_t>(::getpid());
  EXPECT_TRUE(process_alive("/proc", self));
  EXPECT_FALSE(process_is_kvgate_up("/proc", self));  // a test binary, not `kvgate up`
  EXPECT_GT(process_resident_bytes("/proc", self), 1024U * 1024U);
#ifdef _WIN32
  const std::vector<std::string> quick = {util::find_program("cmd").value_or("cmd.exe"), "/c", "exit"};
#else
  const std::vector<std::string> quick = {"/bin/sh", "-c", "exit 0"};
#endif
  auto child = util::Subprocess::spawn({.argv = quick});
  ASSERT_TRUE(child.ok()) << child.error().message();
  const pid_t pid = (*child)->pid();
  ASSERT_TRUE((*child)->wait_for(std::chrono::seconds(30)).has_value());
  EXPECT_FALSE(process_alive("/proc", pid));
  EXPECT_EQ(process_resident_bytes("/proc", pid), 0U);
  EXPECT_FALSE(process_alive("/proc", 0));
}

TEST(StopInstance, SigtermAndWaitForTheExit) {
  auto child = util::Subprocess::spawn({.argv = {"/bin/sleep", "30"}});
  ASSERT_TRUE(child.ok());
  const RunningInstance r{.pid = (*child)->pid(), .description = "sleep"};
  EXPECT_TRUE(stop_instance(r, std::chrono::seconds(10)).ok());  // an unreaped zombie counts as gone
  auto st = (*child)->wait_for(std::chrono::seconds(1));
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->signal, SIGTERM);

  std::atomic<bool> trapped{false};  // the shell says so once SIGTERM is ignored
  auto stubborn = util::Subprocess::spawn({.argv = {"/bin/sh", "-c", "trap '' TERM; echo trapped; sleep 30"},
                                           .on_line = [&](std::string_view) { trapped = true; }});
  ASSERT_TRUE(stubborn.ok());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!trapped && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(trapped.load());
  auto late = stop_instance({.pid = (*stubborn)->pid()}, std::chrono::seconds(1));
  ASSERT_FALSE(late.ok());
  EXPECT_NE(late.error().message().find("still running 1 s after SIGTERM"), std::string::npos);
}

TEST_F(FakeProc, NoLockDirMeansNone) { EXPECT_TRUE(find_running_instances(root_ / "absent", proc_).empty()); }

}  // namespace
}  // namespace kvgate::engine
