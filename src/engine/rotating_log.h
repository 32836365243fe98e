// RotatingLog: an append-only text log that rotates by size, like logrotate's
// `size` + `rotate N`: when a write would take FILE past max_bytes, FILE.(N-1) becomes FILE.N
// (the oldest is dropped), ..., FILE becomes FILE.1, and a new FILE is started. With keep = 0
// the file is simply truncated. Lines longer than max_bytes are written whole.
//
// Thread-safety: all methods may be called from any thread (one internal mutex).
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <string_view>

#include "util/result.h"

namespace kvgate::engine {

class RotatingLog {
 public:
  // Opens (appends to) `path`, creating its directory.
  static Result<std::unique_ptr<RotatingLog>> open(std::filesystem::path path, uint64_t max_bytes, int keep);

  // Appends `line` and a newline, rotating first if needed. A failed write is dropped
  // (logging must never stop the supervisor).
  void write_line(std::string_view line);
  void flush();
  const std::filesystem::path& path() const { return path_; }

 private:
  RotatingLog(std::filesystem::path path, uint64_t max_bytes, int keep)
      : path_(std::move(path)), max_bytes_(max_bytes), keep_(keep) {}
  void rotate();  // REQUIRES: mu_ held

  const std::filesystem::path path_;
  const uint64_t max_bytes_;
  const int keep_;
  std::mutex mu_;
  std::ofstream out_;  // guarded by mu_
  uint64_t size_ = 0;  // guarded by mu_
};

}  // namespace kvgate::engine
