// Shared option parsing for commands (CLI11). parse_args() returns an exit code when the
// command should stop (help printed: 0; usage error: 2, with a message naming the command
// and how to get help), or nullopt when parsing succeeded.
#pragma once

#include <optional>

#include <signal.h>

#include <CLI/CLI.hpp>

namespace kvgate::cli {

std::optional<int> parse_args(CLI::App& app, int argc, char** argv);

// Blocks SIGINT, SIGTERM and SIGHUP in the calling thread and returns them, for a command that
// waits for them (sigwaitinfo/sigtimedwait). Call before any thread exists, so every thread
// inherits the mask (children get a clean mask from util::Subprocess).
sigset_t block_stop_signals();

}  // namespace kvgate::cli
