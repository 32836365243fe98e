#include "cli/command.h"

#include <cstdio>

namespace kvgate::cli {

int run_synth(int, char**) {
  std::fprintf(stderr, "kvgate synth: not built yet\n");
  return kExitUsage;
}

}  // namespace kvgate::cli
