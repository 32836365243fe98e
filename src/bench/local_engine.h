// LocalEngine: a llama-server the benchmark starts itself (`--model FILE`), on a free
// loopback port, with a random API key, `--metrics` (the benchmarks read the engine's own
// counters) and the caller's context and slot count; stopped (process group, SIGTERM then
// SIGKILL) when the object goes away. Extra engine flags are appended verbatim.
//
// The binary is engine::resolve_server(server): --server, $KVGATE_SERVER, the pinned build.
// A start that loses its port to another process (picked free, taken before the bind) is
// retried on a new port. kill_and_restart() is a crash and a supervisor's restart: SIGKILL to
// the engine's process group (no shutdown of any kind), then the same command on a new port.
//
// Thread-safety: one owner.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/http_client.h"
#include "engine/server_process.h"
#include "util/result.h"

namespace kvgate::bench {

struct LocalEngineOptions {
  std::filesystem::path model;
  std::optional<std::string> server;  // binary; default: resolve_server()
  uint64_t context = 8192;            // -c (total; per slot = context / slots)
  int slots = 1;                      // -np
  std::vector<std::string> extra_args;
  std::optional<std::filesystem::path> log_file;  // the engine's output (replaced at start)
  std::chrono::seconds ready_timeout{600};
};

class LocalEngine {
 public:
  static Result<std::unique_ptr<LocalEngine>> start(const LocalEngineOptions& options);
  ~LocalEngine();
  LocalEngine(const LocalEngine&) = delete;
  LocalEngine& operator=(const LocalEngine&) = delete;

  // SIGKILLs the engine and starts a fresh one with the same flags and key on a new free
  // port (endpoint() changes); its output is appended to the same log file.
  Status kill_and_restart();
  // SIGKILLs the engine (no shutdown of any kind) and reaps it; its output stays readable.
  void kill();
  bool running() { return process_->running(); }

  Endpoint endpoint() const;
  const std::vector<std::string>& argv() const { return process_->argv(); }
  std::string log_tail(size_t lines = 20) const { return process_->log_tail(lines); }
  std::vector<std::string> log_lines() const { return process_->log_lines(); }  // all kept, oldest first
  // The command line without the random key (for reports).
  std::string command_line() const;

 private:
  LocalEngine() = default;
  Status launch();  // starts the engine of binary_, args_ and options_ (REQUIRES: none running)

  LocalEngineOptions options_;
  std::filesystem::path binary_;
  std::vector<std::string> args_;
  std::unique_ptr<engine::ServerProcess> process_;
  std::string api_key_;
};

// Splits "-t 2 -fa on" into {"-t", "2", "-fa", "on"} (whitespace-separated; no quoting).
std::vector<std::string> split_args(std::string_view text);

}  // namespace kvgate::bench
