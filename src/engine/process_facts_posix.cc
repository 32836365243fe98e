#include <cstdlib>
#include <string>

#include "engine/process_facts.h"

namespace kvgate::engine {

namespace fs = std::filesystem;

// argv[0] named kvgate and argv[1] "up", from /proc/PID/cmdline (NUL-separated).
bool process_is_kvgate_up(const fs::path& proc, pid_t pid) {
  const std::string cmdline = read_small_file(proc / std::to_string(pid) / "cmdline");
  const size_t first = cmdline.find('\0');
  if (first == std::string::npos) return false;
  const std::string argv0 = cmdline.substr(0, first);
  const std::string argv1 = cmdline.substr(first + 1, cmdline.find('\0', first + 1) - first - 1);
  return fs::path(argv0).filename() == "kvgate" && argv1 == "up";
}

uint64_t process_resident_bytes(const fs::path& proc, pid_t pid) {
  if (pid <= 0) return 0;
  const std::string status = read_small_file(proc / std::to_string(pid) / "status");
  const size_t at = status.find("VmRSS:");
  if (at == std::string::npos) return 0;
  return std::strtoull(status.c_str() + at + 6, nullptr, 10) * 1024;
}

// Alive and not a zombie waiting for its parent: /proc/PID/stat's state after "(comm) ".
bool process_alive(const fs::path& proc, pid_t pid) {
  if (pid <= 0) return false;
  const std::string stat = read_small_file(proc / std::to_string(pid) / "stat");
  const size_t close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size()) return false;
  return stat[close + 2] != 'Z' && stat[close + 2] != 'X';
}

}  // namespace kvgate::engine
