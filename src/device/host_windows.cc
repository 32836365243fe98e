#include <windows.h>

#include "device/host.h"

namespace kvgate::device {

std::string host_machine() {
  SYSTEM_INFO info{};
  ::GetNativeSystemInfo(&info);
  switch (info.wProcessorArchitecture) {
    case PROCESSOR_ARCHITECTURE_AMD64:
      return "x86_64";
    case PROCESSOR_ARCHITECTURE_ARM64:
      return "aarch64";
    default:
      return "";
  }
}

std::optional<HostMemory> host_memory() {
  MEMORYSTATUSEX m{};
  m.dwLength = sizeof m;
  if (!::GlobalMemoryStatusEx(&m)) return std::nullopt;
  return HostMemory{.total = m.ullTotalPhys, .available = m.ullAvailPhys};
}

}  // namespace kvgate::device
