// Test support: a real `kvgate up` process (the binary built beside the tests) with its
// output collected, for end-to-end tests that fault the engine, the session store or kvgate
// itself. Its JSON log lines (util/log.h) are parsed, so a test can see how each request was
// recognised and what the engine had cached.
//
// Thread-safety: the output is collected on the process's reader thread under a mutex; the
// rest is for the test's thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/subprocess.h"

namespace kvgate::testing {

// The kvgate binary of this build.
std::string kvgate_binary();
// Whether `pid` is a live process (a zombie counts as gone).
bool process_alive(pid_t pid);

class UpProcess {
 public:
  // Runs `prefix... kvgate COMMAND args...` (prefix: e.g. unshare for a private mount
  // namespace; COMMAND: up, or serve).
  explicit UpProcess(std::vector<std::string> args, std::vector<std::string> prefix = {}, std::string command = "up");
  ~UpProcess();
  UpProcess(const UpProcess&) = delete;
  UpProcess& operator=(const UpProcess&) = delete;

  // Waits until the output contains `text` (true) or the process ends / time passes (false).
  bool wait_for(const std::string& text, std::chrono::milliseconds timeout = std::chrono::seconds(120));
  // Waits until the gateway line is printed (ready to serve).
  bool wait_ready(std::chrono::milliseconds timeout = std::chrono::seconds(120)) {
    return wait_for("gateway: http://", timeout);
  }
  // Exit code, or -signal; -1000 when it did not end in time.
  int wait_exit(std::chrono::seconds timeout = std::chrono::seconds(60));
  pid_t pid() const;
  bool running();
  void kill9();
  // The current engine's pid: the last "engine start #N: pid P" line (0 if none).
  pid_t engine_pid();
  // Engine starts seen so far.
  int engine_starts();
  std::string output();
  // The JSON log lines with event == `event` (e.g. "request").
  std::vector<nlohmann::json> events(const std::string& event);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::string out_;
  std::unique_ptr<util::Subprocess> process_;
};

}  // namespace kvgate::testing
