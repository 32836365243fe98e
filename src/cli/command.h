// The kvgate command table. main.cc dispatches `kvgate NAME ...` to the entry whose name
// matches; each command lives in its own file and parses its own options.
//
// Exit codes shared by all commands: 0 success, 1 the command failed (message on stderr),
// 2 usage error or a command that is not built yet.
#pragma once

#include <span>
#include <string_view>

namespace kvgate::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

struct Command {
  std::string_view name;
  std::string_view summary;
  // nullptr: the command is part of the contract but not built yet.
  int (*run)(int argc, char** argv);
};

std::span<const Command> commands();

int run_inspect(int argc, char** argv);
int run_plan(int argc, char** argv);
int run_doctor(int argc, char** argv);
int run_synth(int argc, char** argv);
int run_up(int argc, char** argv);
int run_serve(int argc, char** argv);
int run_unit(int argc, char** argv);
int run_bench(int argc, char** argv);
int run_engine(int argc, char** argv);
int run_run(int argc, char** argv);

}  // namespace kvgate::cli
