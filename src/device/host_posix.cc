#include <sys/utsname.h>

#include "device/host.h"

namespace kvgate::device {

std::string host_machine() {
  utsname u{};
  return ::uname(&u) == 0 ? u.machine : "";
}

std::optional<HostMemory> host_memory() { return std::nullopt; }

}  // namespace kvgate::device
