// Test support: running this build's `kvgate` binary and collecting what it prints.
//
// When the build targets another machine (the arm64 cross build), the binary runs behind
// CMake's cross-compiling emulator (qemu-aarch64), so the CLI tests run there unchanged.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace kvgate::testing {

struct Ran {
  int code = -1;        // exit code; -N when killed by signal N; -1 when it did not run
  std::string output;   // stdout and stderr, line by line
};

// The command line prefix that runs this build's kvgate: [emulator,] binary.
std::vector<std::string> kvgate_command();

// Runs kvgate with `args` (at most 60 s) and its output.
Ran run_kvgate(const std::vector<std::string>& args, const std::map<std::string, std::string>& set_env = {});

// Runs any command line (argv[0] a path) the same way.
Ran run_command(std::vector<std::string> argv, const std::map<std::string, std::string>& set_env = {});

}  // namespace kvgate::testing
