// Service files that run `kvgate up` at boot: a systemd unit, a supervisord program section or
// a Windows Task Scheduler task, for the exact options `kvgate unit` was given.
//
// Both restart kvgate when it fails (kvgate itself restarts a crashed or hung engine; it
// exits non-zero only when it gives up, e.g. a start that fails verification), stop it with
// SIGTERM to the whole process group with a SIGKILL fallback (KillMode=control-group /
// stopasgroup+killasgroup), fix XDG_CACHE_HOME so the service finds the same engine cache,
// probe cache and default model as the user who generated it, and leave log rotation of the
// engine's output to kvgate (--log-max-size/--log-keep); supervisord also rotates the
// captured stdout. An opt-in pre-step locks CPU/GPU clocks (Jetson: jetson_clocks).
//
// Pure functions; no I/O.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "util/result.h"

namespace kvgate::engine {

struct ServiceUnitOptions {
  std::string name = "kvgate";
  std::string kvgate_binary;         // absolute path
  std::vector<std::string> up_args;  // the arguments after `kvgate up`
  std::string description = "kvgate: llama-server supervisor and gateway";
  std::optional<std::string> user;  // run as this user (default: the service manager's)
  std::map<std::string, std::string> environment;
  // Opt-in command line run before kvgate (failures ignored), e.g. "/usr/bin/jetson_clocks".
  // Written as given: systemd splits it into words, supervisord runs it through /bin/sh.
  std::optional<std::string> clock_lock_command;
  int restart_delay_s = 5;
  int stop_timeout_s = 30;           // SIGTERM → SIGKILL
  int start_limit_burst = 5;         // give up after this many failed starts ...
  int start_limit_interval_s = 300;  // ... within this window
  std::string log_file;              // supervisord: where kvgate's own output goes
  uint64_t log_max_bytes = 20ull << 20;
  int log_keep = 5;
};

std::string systemd_unit(const ServiceUnitOptions& options);
std::string supervisor_program(const ServiceUnitOptions& options);
// A Windows Task Scheduler task (windows_task.cc): a task rather than a service, because a user
// installs it with the system's own schtasks and without administrator rights, and kvgate.exe
// needs no service entry point; it starts at the user's logon, restarts kvgate when it exits
// with an error (Task Scheduler waits at least a minute between restarts) and appends kvgate's
// output to `log_file` through cmd.exe. Error when an option holds a '%' (cmd would expand it).
Result<std::string> windows_task(const ServiceUnitOptions& options);

// One command-line word quoted for systemd's ExecStart= (`%` and `$` escaped).
std::string systemd_quote(const std::string& word);
// One word quoted for POSIX sh / Python's shlex (what supervisord splits `command=` with).
std::string shell_quote(const std::string& word);

}  // namespace kvgate::engine
