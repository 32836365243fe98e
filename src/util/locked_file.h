// LockedFile: a small text file held under an exclusive lock that the system drops with the
// process (also when it is killed), so a crashed holder never leaves a stale lock; the text
// (who holds it) stays readable by the processes that fail to take the lock.
// POSIX: flock(2) on the file. Windows: LockFileEx on a byte far past the end of the file,
// so the text itself stays readable. locked_file_posix.cc, locked_file_windows.cc.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "util/result.h"

namespace kvgate::util {

class LockedFile {
 public:
  // Opens `path` (creating it) and locks it without waiting. `*held_by` (when given) receives
  // the text of the file when another process holds the lock; the result is then nullptr.
  static Result<std::unique_ptr<LockedFile>> try_lock(const std::filesystem::path& path,
                                                      std::string* held_by);

  ~LockedFile();  // unlocks
  LockedFile(const LockedFile&) = delete;
  LockedFile& operator=(const LockedFile&) = delete;

  // Replaces the file's text.
  void write_text(std::string_view text);

 private:
  explicit LockedFile(intptr_t handle) : handle_(handle) {}
  intptr_t handle_;  // a descriptor (POSIX) or a HANDLE (Windows)
};

}  // namespace kvgate::util
