// InstanceLock: one `kvgate up` per listen address and per model.
//
// Each key (e.g. "listen 127.0.0.1:8787", "model /abs/path/model.gguf") is an flock(2)ed
// file under a lock directory (default cache_root()/locks), named by a readable slug plus a
// hash of the key. The holder writes its description (pid, listen address, engine port,
// model) into the file, so a refused second instance can name the running one. flock locks
// vanish with the process, also under SIGKILL, so a crashed kvgate never leaves a stale
// lock; the files themselves stay (an unlocked file means nothing).
//
// Thread-safety: an InstanceLock is owned by one thread; update() may be called from any
// thread (it locks an internal mutex).
#pragma once

#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "util/locked_file.h"
#include "util/result.h"

namespace kvgate::engine {

class InstanceLock {
 public:
  // Takes every key or none. If another process holds one: an Error whose message contains
  // that holder's description ("kvgate up (pid 123) ... is already running ...").
  // `description` is written into each lock file.
  static Result<std::unique_ptr<InstanceLock>> acquire(const std::vector<std::string>& keys,
                                                       const std::string& description,
                                                       std::filesystem::path dir = {});
  ~InstanceLock();
  InstanceLock(const InstanceLock&) = delete;
  InstanceLock& operator=(const InstanceLock&) = delete;

  // Rewrites the description (e.g. the engine's new port after a restart).
  void update(const std::string& description);

  // The lock file of `key` under `dir` (default dir: cache_root()/locks).
  static std::filesystem::path file_for(const std::string& key, const std::filesystem::path& dir = {});

 private:
  InstanceLock() = default;
  std::mutex mu_;
  std::vector<std::unique_ptr<util::LockedFile>> files_;  // guarded by mu_ for update()
};

}  // namespace kvgate::engine
