#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/private_files.h"

namespace kvgate::util {

namespace fs = std::filesystem;

namespace {

Error os_error(std::string_view what, const fs::path& path) {
  return Error(fmt::format("cannot {} '{}': {}", what, path.string(), std::strerror(errno)));
}

// Opens (creating with 0600) and forces 0600 on what was there before.
Result<int> open_private(const fs::path& file, int flags) {
  const int fd = ::open(file.c_str(), flags | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return os_error("create", file);
  if (::fchmod(fd, 0600) != 0) {
    Error e = os_error("restrict the permissions of", file);
    ::close(fd);
    return e;
  }
  return fd;
}

}  // namespace

Status make_private_dir(const fs::path& dir) {
  std::error_code ec;
  const bool created = fs::create_directories(dir, ec);
  if (ec) return Error(fmt::format("cannot create directory '{}': {}", dir.string(), ec.message()));
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return os_error("inspect", dir);
  // A shared directory someone named (/tmp: sticky; another user's) keeps its mode.
  const bool ours = st.st_uid == ::geteuid() && (st.st_mode & S_ISVTX) == 0;
  if ((created || ours) && (st.st_mode & 0777) != 0700 && ::chmod(dir.c_str(), 0700) != 0) {
    return os_error("restrict the permissions of", dir);
  }
  return {};
}

Status make_private_file(const fs::path& file) {
  KV_ASSIGN_OR_RETURN(int fd, open_private(file, O_WRONLY | O_APPEND));
  ::close(fd);
  return {};
}

Status write_private_file(const fs::path& file, std::string_view content) {
  const fs::path tmp = file.string() + fmt::format(".tmp{}", ::getpid());
  ::unlink(tmp.c_str());
  KV_ASSIGN_OR_RETURN(int fd, open_private(tmp, O_WRONLY | O_TRUNC | O_EXCL));
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      Error e = os_error("write", tmp);
      ::close(fd);
      ::unlink(tmp.c_str());
      return e;
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  if (::rename(tmp.c_str(), file.c_str()) != 0) {
    Error e = os_error("move into place", file);
    ::unlink(tmp.c_str());
    return e;
  }
  return {};
}

}  // namespace kvgate::util
