#include "util/console.h"

namespace kvgate::util {

std::vector<std::string> init_console(int argc, char** argv) {
  return std::vector<std::string>(argv, argv + argc);
}

}  // namespace kvgate::util
