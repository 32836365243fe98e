#include "engine/instance_lock.h"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include "engine/pinned.h"

namespace kvgate::engine {
namespace {

namespace fs = std::filesystem;

std::string slug(const std::string& key) {
  std::string out;
  for (char c : key) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '-' || c == '_';
    out += keep ? c : '_';
  }
  if (out.size() > 60) out = out.substr(out.size() - 60);
  uint64_t h = 1469598103934665603ULL;
  for (char c : key) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;
  }
  return fmt::format("{}-{:08x}", out, static_cast<uint32_t>(h));
}

std::string read_all(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n = 0;
  off_t off = 0;
  while ((n = ::pread(fd, buf, sizeof buf, off)) > 0) {
    out.append(buf, static_cast<size_t>(n));
    off += n;
    if (out.size() > 64 * 1024) break;
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

void write_description(int fd, const std::string& description) {
  if (::ftruncate(fd, 0) != 0) return;
  const std::string text = description + "\n";
  (void)!::pwrite(fd, text.data(), text.size(), 0);
}

}  // namespace

fs::path InstanceLock::file_for(const std::string& key, const fs::path& dir) {
  return (dir.empty() ? cache_root() / "locks" : dir) / (slug(key) + ".lock");
}

Result<std::unique_ptr<InstanceLock>> InstanceLock::acquire(const std::vector<std::string>& keys,
                                                            const std::string& description, fs::path dir) {
  if (dir.empty()) dir = cache_root() / "locks";
  std::error_code ec;
  fs::create_directories(dir, ec);
  std::unique_ptr<InstanceLock> lock(new InstanceLock());
  for (const auto& key : keys) {
    const fs::path file = file_for(key, dir);
    const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
      return Error(fmt::format("cannot open lock file '{}': {}", file.string(), std::strerror(errno)));
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      std::string holder = err == EWOULDBLOCK ? read_all(fd) : std::string();
      ::close(fd);
      if (err != EWOULDBLOCK) {
        return Error(fmt::format("cannot lock '{}': {}", file.string(), std::strerror(err)));
      }
      if (holder.empty()) holder = "another kvgate up (it has not described itself yet)";
      return Error(fmt::format("{} is already served: {} holds it (lock file {}); stop that one first", key,
                               holder, file.string()));
    }
    lock->fds_.push_back(fd);  // released (with the locks taken so far) if a later key fails
  }
  lock->update(description);
  return lock;
}

void InstanceLock::update(const std::string& description) {
  std::lock_guard guard(mu_);
  for (int fd : fds_) write_description(fd, description);
}

InstanceLock::~InstanceLock() {
  for (int fd : fds_) ::close(fd);  // closing releases the flock
}

}  // namespace kvgate::engine
