#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include "util/locked_file.h"

namespace kvgate::util {

namespace {

// At most 64 KiB of the file, without trailing newlines and spaces.
std::string read_text(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n = 0;
  off_t off = 0;
  while ((n = ::pread(fd, buf, sizeof buf, off)) > 0) {
    out.append(buf, static_cast<size_t>(n));
    off += static_cast<off_t>(n);
    if (out.size() > 64 * 1024) break;
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

}  // namespace

Result<std::unique_ptr<LockedFile>> LockedFile::try_lock(const std::filesystem::path& path,
                                                         std::string* held_by) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    return Error(fmt::format("cannot open lock file '{}': {}", path.string(), std::strerror(errno)));
  if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return std::unique_ptr<LockedFile>(new LockedFile(fd));
  const int err = errno;
  if (err == EWOULDBLOCK && held_by != nullptr) *held_by = read_text(fd);
  ::close(fd);
  if (err != EWOULDBLOCK)
    return Error(fmt::format("cannot lock '{}': {}", path.string(), std::strerror(err)));
  return std::unique_ptr<LockedFile>();
}

LockedFile::~LockedFile() { ::close(static_cast<int>(handle_)); }  // closing releases the flock

void LockedFile::write_text(std::string_view text) {
  const int fd = static_cast<int>(handle_);
  if (::ftruncate(fd, 0) != 0) return;
  (void)!::pwrite(fd, text.data(), text.size(), 0);
}

}  // namespace kvgate::util
