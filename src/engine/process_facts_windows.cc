// <windows.h> first: the headers after it need its types.
// clang-format off
#include <windows.h>
#include <psapi.h>
// clang-format on

#include <string>

#include "engine/process_facts.h"

namespace kvgate::engine {
namespace {

// A handle that may query and wait, closed when it goes; null when the process is gone (or
// not ours to look at).
struct ProcessHandle {
  HANDLE h;
  explicit ProcessHandle(pid_t pid)
      : h(pid > 0
              ? ::OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION | SYNCHRONIZE, FALSE, static_cast<DWORD>(pid))
              : nullptr) {}
  ~ProcessHandle() {
    if (h != nullptr) ::CloseHandle(h);
  }
  ProcessHandle(const ProcessHandle&) = delete;
  ProcessHandle& operator=(const ProcessHandle&) = delete;
};

}  // namespace

bool process_alive(const std::filesystem::path& /*proc*/, pid_t pid) {
  const ProcessHandle p(pid);
  return p.h != nullptr && ::WaitForSingleObject(p.h, 0) == WAIT_TIMEOUT;
}

bool process_is_kvgate_up(const std::filesystem::path& /*proc*/, pid_t pid) {
  const ProcessHandle p(pid);
  if (p.h == nullptr) return false;
  wchar_t image[MAX_PATH];
  DWORD size = MAX_PATH;
  if (!::QueryFullProcessImageNameW(p.h, 0, image, &size)) return false;
  std::wstring name = std::filesystem::path(std::wstring(image, size)).filename().wstring();
  for (wchar_t& c : name) c = static_cast<wchar_t>(::towlower(c));
  return name == L"kvgate.exe";
}

uint64_t process_resident_bytes(const std::filesystem::path& /*proc*/, pid_t pid) {
  const ProcessHandle p(pid);
  PROCESS_MEMORY_COUNTERS counters{};
  if (p.h == nullptr || !::GetProcessMemoryInfo(p.h, &counters, sizeof counters)) return 0;
  return counters.WorkingSetSize;
}

}  // namespace kvgate::engine
