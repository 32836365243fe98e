// How a long-running command (kvgate up, serve) learns it should stop, and how another kvgate
// asks it to.
//
// POSIX (stop_signals_posix.cc): SIGINT, SIGTERM and SIGHUP, blocked in every thread (install()
// runs before any thread exists, so all inherit the mask; children get a clean mask from
// util::Subprocess) and collected by wait(). request_stop() sends SIGTERM.
// Windows (stop_signals_windows.cc): Ctrl-C, Ctrl-Break and the console closing (a console
// control handler), and a named event per process, "Local\kvgate-stop-PID", that
// request_stop() sets — the polite stop another kvgate (or a service manager's script) uses.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include <sys/types.h>

#include "util/result.h"

namespace kvgate::util {

class StopSignals {
 public:
  // Call once, before any thread exists.
  static StopSignals install();
  // Waits up to `timeout`; what asked to stop ("Interrupt", "Terminated", "Ctrl-C", ...), or
  // nullopt when nothing did.
  std::optional<std::string> wait(std::chrono::milliseconds timeout) const;

 private:
  StopSignals() = default;
};

// Asks the kvgate process `pid` to stop as its own Ctrl-C would.
Status request_stop(pid_t pid);

}  // namespace kvgate::util
