// What the running machine says of itself through system calls rather than files: its
// architecture name (uname's machine; "x86_64" or "aarch64" on Windows) and, where there is no
// /proc/meminfo (Windows: GlobalMemoryStatusEx), its memory. host_posix.cc, host_windows.cc.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace kvgate::device {

std::string host_machine();

struct HostMemory {
  uint64_t total = 0;
  uint64_t available = 0;
};
// nullopt on POSIX: /proc/meminfo is read instead (facts.cc), so a recorded tree reads the same.
std::optional<HostMemory> host_memory();

}  // namespace kvgate::device
