// The supervisor's side effects, behind small interfaces so its owner loop can be tested
// with a fake clock, a fake launcher and a fake prober; production uses SteadyClock,
// ServerProcessLauncher (engine/server_process.h) and HttpEngineProber (engine/health_probe.h).
//
// Thread-safety: a Clock is shared between the owner thread and callers; launchers and
// probers are used by the owner thread only; a RunningEngine's methods may be called from
// any thread (ServerProcess's are).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sys/types.h>

#include "engine/supervisor_state.h"
#include "util/result.h"
#include "util/subprocess.h"

namespace kvgate::engine {

// Where a running engine listens, and the key it requires.
struct EngineEndpoint {
  std::string host;
  uint16_t port = 0;
  std::string api_key;  // empty: none
  std::string base_url() const;
};

struct LaunchSpec {
  std::filesystem::path binary;
  std::vector<std::string> args;  // everything but --host/--port (plan::launch_args)
  std::string host = "127.0.0.1";
  uint16_t port = 0;    // 0: a free loopback port at every start
  std::string api_key;  // the key inside `args`, for the probes
  size_t ring_lines = 5000;
  std::map<std::string, std::string> env;  // set in the engine's environment (e.g. CUDA_VISIBLE_DEVICES)
};

class Clock {
 public:
  virtual ~Clock() = default;
  virtual SteadyTime now() = 0;
  // Waits on `cv` (whose mutex `lock` holds) until notified or `deadline`.
  virtual void wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                          SteadyTime deadline) = 0;
};

class SteadyClock final : public Clock {
 public:
  SteadyTime now() override { return std::chrono::steady_clock::now(); }
  void wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                  SteadyTime deadline) override {
    cv.wait_until(lock, deadline);
  }
};

class RunningEngine {
 public:
  virtual ~RunningEngine() = default;
  virtual pid_t pid() const = 0;
  virtual EngineEndpoint endpoint() const = 0;
  virtual bool running() = 0;
  virtual std::optional<util::ExitStatus> exit_status() = 0;
  // SIGTERM to the process group (and SIGCONT, so a stopped engine can act on it), SIGKILL
  // after `grace`; returns how it ended.
  virtual util::ExitStatus stop(Millis grace) = 0;
  virtual std::string log_tail(size_t lines) const = 0;
};

class EngineLauncher {
 public:
  virtual ~EngineLauncher() = default;
  // Starts the engine; `on_line` receives every output line, in order, from another thread.
  virtual Result<std::unique_ptr<RunningEngine>> launch(const LaunchSpec& spec,
                                                        std::function<void(std::string_view)> on_line) = 0;
};

// The outcome of one HTTP check against the engine.
struct CheckResult {
  bool ok = false;
  int http_status = 0;  // 0: no HTTP answer (refused, reset, timed out)
  std::string detail;   // why it failed, for transition causes
};

class EngineProber {
 public:
  virtual ~EngineProber() = default;
  // GET /health: liveness of the HTTP thread only (mainline answers it without the task queue).
  virtual CheckResult health(const EngineEndpoint& ep, Millis timeout) = 0;
  // A probe through the engine's task queue: GET /slots, or a 1-token completion where /slots
  // is disabled. Fails on a time-out, no answer or a 5xx.
  virtual CheckResult deep(const EngineEndpoint& ep, Millis timeout) = 0;
  // A real 1-token completion (readiness).
  virtual CheckResult completion(const EngineEndpoint& ep, Millis timeout) = 0;
};

// ServerProcess-backed launcher (own process group, parent-death signal, LLAMA_ARG_* removed).
// REQUIRES: launch() is called from a thread that outlives the engine: the parent-death
// signal fires when the spawning thread exits.
class ServerProcessLauncher final : public EngineLauncher {
 public:
  Result<std::unique_ptr<RunningEngine>> launch(const LaunchSpec& spec,
                                                std::function<void(std::string_view)> on_line) override;
};

}  // namespace kvgate::engine
