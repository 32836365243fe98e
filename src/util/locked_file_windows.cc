#include <fmt/format.h>
#include <windows.h>

#include "util/locked_file.h"
#include "util/windows_error.h"

namespace kvgate::util {

namespace {

// The locked byte: far past any text, so readers of the text never meet the lock.
constexpr DWORD kLockOffsetHigh = 0x40000000;

HANDLE handle_of(intptr_t h) { return reinterpret_cast<HANDLE>(h); }

std::string read_text(HANDLE file) {
  std::string out(64 * 1024, '\0');
  DWORD n = 0;
  OVERLAPPED at{};  // from offset 0
  if (!::ReadFile(file, out.data(), static_cast<DWORD>(out.size()), &n, &at)) n = 0;
  out.resize(n);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r' || out.back() == ' ')) out.pop_back();
  return out;
}

}  // namespace

Result<std::unique_ptr<LockedFile>> LockedFile::try_lock(const std::filesystem::path& path,
                                                         std::string* held_by) {
  HANDLE file = ::CreateFileW(path.c_str(), GENERIC_READ | GENERIC_WRITE,
                              FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, nullptr, OPEN_ALWAYS,
                              FILE_ATTRIBUTE_NORMAL, nullptr);
  if (file == INVALID_HANDLE_VALUE) {
    return Error(fmt::format("cannot open lock file '{}': {}", path.string(), last_windows_error()));
  }
  ::SetHandleInformation(file, HANDLE_FLAG_INHERIT, 0);
  OVERLAPPED at{};
  at.OffsetHigh = kLockOffsetHigh;
  if (::LockFileEx(file, LOCKFILE_EXCLUSIVE_LOCK | LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, &at)) {
    return std::unique_ptr<LockedFile>(new LockedFile(reinterpret_cast<intptr_t>(file)));
  }
  const DWORD err = ::GetLastError();
  if (err == ERROR_LOCK_VIOLATION && held_by != nullptr) *held_by = read_text(file);
  ::CloseHandle(file);
  if (err != ERROR_LOCK_VIOLATION) {
    return Error(fmt::format("cannot lock '{}': {}", path.string(), windows_error_text(err)));
  }
  return std::unique_ptr<LockedFile>();
}

LockedFile::~LockedFile() { ::CloseHandle(handle_of(handle_)); }  // closing releases the lock

void LockedFile::write_text(std::string_view text) {
  HANDLE file = handle_of(handle_);
  LARGE_INTEGER zero{};
  if (!::SetFilePointerEx(file, zero, nullptr, FILE_BEGIN) || !::SetEndOfFile(file)) return;
  DWORD n = 0;
  ::WriteFile(file, text.data(), static_cast<DWORD>(text.size()), &n, nullptr);
}

}  // namespace kvgate::util
