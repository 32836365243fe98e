// The `kvgate up` instances running on this machine, found and stopped from outside.
//
// Every `kvgate up` describes itself in its InstanceLock files (instance_lock.h):
//   kvgate up (pid 123) serving /m.gguf on http://127.0.0.1:8787, engine pid 456 on port 40001
// The files stay after the process exits, so a description counts only while its pid is
// alive and is a `kvgate up` (process_facts.h: /proc/PID/cmdline, or on Windows the image
// kvgate.exe). No lock is taken to find out: probing one would make a `kvgate up` starting at
// that moment refuse to start.
//
// Stopping uses the path every other stop takes (Ctrl-C, systemctl stop): SIGTERM to the
// kvgate process (Windows: its named stop event, util/stop_signals.h), which stops its engine
// and saves its sessions before it exits.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sys/types.h>

#include "util/result.h"

namespace kvgate::engine {

struct RunningInstance {
  pid_t pid = 0;
  pid_t engine_pid = 0;         // 0: not known (the engine has not started yet)
  std::string description;      // as written into its lock file
  uint64_t resident_bytes = 0;  // kvgate + engine resident memory (GPU allocations not included)
};

// The pids in a lock file's description; nullopt when it is not one.
std::optional<RunningInstance> parse_instance_description(std::string_view text);

// The live instances described under `lock_dir` (default cache_root()/locks), one per kvgate
// pid, read through `proc` (default /proc; unused on Windows).
std::vector<RunningInstance> find_running_instances(const std::filesystem::path& lock_dir = {},
                                                    const std::filesystem::path& proc = "/proc");

// SIGTERM to the instance's kvgate, then waits up to `timeout` for it (and its engine) to
// exit. Error when the signal cannot be sent or it is still running after `timeout`.
Status stop_instance(const RunningInstance& instance, std::chrono::seconds timeout);

}  // namespace kvgate::engine
