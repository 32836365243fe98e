// ServerProcess: one running llama-server (mainline or ik_llama.cpp) started by kvgate.
//
// start() spawns the binary with the given flags plus --host/--port (a free loopback port
// unless one is given), in its own process group, with LLAMA_ARG_* variables removed from
// its environment (the engines re-read them over the command line) and LLAMA_API_KEY too
// (mainline adds that key to the ones it accepts when --api-key is not given, which with
// --api-key-file would let a key kvgate does not know past the gateway). The engine's key
// belongs in a 0600 file passed with --api-key-file (plan/launch_args.h), never in `args`
// where /proc/PID/cmdline shows it to every local user. Its output is kept as
// lines in a bounded ring buffer and, optionally, appended to a log file; observers can
// subscribe to lines as they arrive (startup verification reads the live log this way).
//
// wait_ready() polls GET /health until it answers 200, while watching for early exit, and
// fails with the exit status and the log's last lines if the server dies or the deadline
// passes. stop() sends SIGTERM to the group and SIGKILL after a grace period.
//
// Thread-safety: all methods may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "util/result.h"
#include "util/subprocess.h"

namespace kvgate::engine {

struct ServerLaunch {
  std::filesystem::path binary;
  std::vector<std::string> args;  // everything but --host/--port
  std::string host = "127.0.0.1";
  uint16_t port = 0;              // 0: pick a free loopback port
  std::optional<std::filesystem::path> log_file;  // created 0600 (directory 0700)
  size_t ring_lines = 5000;
  std::map<std::string, std::string> env;              // set in its environment
  std::function<void(std::string_view line)> on_line;  // called from the reader thread
};

class ServerProcess {
 public:
  static Result<std::unique_ptr<ServerProcess>> start(ServerLaunch launch);
  ~ServerProcess();

  Status wait_ready(std::chrono::milliseconds timeout);

  uint16_t port() const { return port_; }
  const std::string& host() const { return host_; }
  std::string base_url() const;
  pid_t pid() const { return process_->pid(); }
  const std::vector<std::string>& argv() const { return argv_; }
  bool running() { return process_->running(); }
  std::optional<util::ExitStatus> exit_status() { return process_->exit_status(); }
  void signal(int sig) { process_->signal_group(sig); }
  util::ExitStatus stop(std::chrono::milliseconds grace = std::chrono::seconds(10));

  // The retained output lines (oldest first) and the last `n` of them joined.
  std::vector<std::string> log_lines() const;
  std::string log_tail(size_t n = 20) const;

 private:
  ServerProcess() = default;
  void on_line(std::string_view line);

  std::string host_;
  uint16_t port_ = 0;
  std::vector<std::string> argv_;
  size_t ring_limit_ = 0;
  std::function<void(std::string_view)> observer_;
  mutable std::mutex mu_;
  std::deque<std::string> ring_;     // guarded by mu_
  std::ofstream log_;                // guarded by mu_
  std::unique_ptr<util::Subprocess> process_;
};

}  // namespace kvgate::engine
