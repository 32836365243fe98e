// Shared option parsing for commands (CLI11). parse_args() returns an exit code when the
// command should stop (help printed: 0; usage error: 2, with a message naming the command
// and how to get help), or nullopt when parsing succeeded.
#pragma once

#include <optional>

#include <CLI/CLI.hpp>

namespace kvgate::cli {

std::optional<int> parse_args(CLI::App& app, int argc, char** argv);

}  // namespace kvgate::cli
