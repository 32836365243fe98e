#include "engine/instance_lock.h"

#include <fmt/format.h>

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
    std::string holder;
    KV_ASSIGN_OR_RETURN(auto locked, util::LockedFile::try_lock(file, &holder));
    if (!locked) {
      if (holder.empty()) holder = "another kvgate up (it has not described itself yet)";
      return Error(fmt::format("{} is already served: {} holds it (lock file {}); stop that one first", key,
                               holder, file.string()));
    }
    lock->files_.push_back(std::move(locked));  // released (with the locks taken so far) if a later key fails
  }
  lock->update(description);
  return lock;
}

void InstanceLock::update(const std::string& description) {
  std::lock_guard guard(mu_);
  for (auto& f : files_) f->write_text(description + "\n");
}

InstanceLock::~InstanceLock() = default;  // closing the files releases the locks

}  // namespace kvgate::engine
