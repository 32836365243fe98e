// kvgate: plans, launches, verifies and fronts a llama.cpp-family server.
// This file only dispatches to the command table (command.cc).
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "cli/command.h"
#include "util/console.h"

namespace {

void print_usage(std::FILE* out) {
  std::fprintf(out, "usage: kvgate COMMAND [options]   (kvgate COMMAND --help for its options)\n\ncommands:\n");
  for (const auto& c : kvgate::cli::commands()) {
    std::fprintf(out, "  %-8.*s %.*s%s\n", static_cast<int>(c.name.size()), c.name.data(),
                 static_cast<int>(c.summary.size()), c.summary.data(), c.run ? "" : " (not built yet)");
  }
}

}  // namespace

int main(int raw_argc, char** raw_argv) {
  using namespace kvgate::cli;
  // UTF-8 arguments and console text on every platform (util/console.h).
  std::vector<std::string> args = kvgate::util::init_console(raw_argc, raw_argv);
  std::vector<char*> arg_pointers;
  for (auto& a : args) arg_pointers.push_back(a.data());
  arg_pointers.push_back(nullptr);
  const int argc = static_cast<int>(args.size());
  char** argv = arg_pointers.data();
  if (argc < 2) {
    print_usage(stderr);
    return kExitUsage;
  }
  const std::string_view name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") {
    print_usage(stdout);
    return kExitOk;
  }
  if (name == "--version") {
    std::printf("kvgate %s\n", KVGATE_VERSION);
    return kExitOk;
  }
  for (const auto& c : commands()) {
    if (c.name != name) continue;
    if (c.run == nullptr) {
      std::fprintf(stderr, "kvgate %s: this command is not built yet in kvgate %s (see docs/ARCHITECTURE.md for what exists)\n",
                   argv[1], KVGATE_VERSION);
      return kExitUsage;
    }
    try {
      return c.run(argc - 1, argv + 1);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "kvgate %s: internal error: %s\n", argv[1], e.what());
      return kExitFailure;
    }
  }
  std::fprintf(stderr, "kvgate: unknown command '%s'\n\n", argv[1]);
  print_usage(stderr);
  return kExitUsage;
}
