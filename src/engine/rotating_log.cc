#include "engine/rotating_log.h"

#include <fmt/format.h>

namespace kvgate::engine {

namespace fs = std::filesystem;

Result<std::unique_ptr<RotatingLog>> RotatingLog::open(fs::path path, uint64_t max_bytes, int keep) {
  if (max_bytes == 0) return Error("log size limit must be positive");
  if (keep < 0) return Error("the number of rotated logs to keep cannot be negative");
  std::error_code ec;
  if (path.has_parent_path()) fs::create_directories(path.parent_path(), ec);
  std::unique_ptr<RotatingLog> log(new RotatingLog(path, max_bytes, keep));
  log->out_.open(path, std::ios::app | std::ios::binary);
  if (!log->out_) return Error(fmt::format("cannot open log file '{}'", path.string()));
  const auto size = fs::file_size(path, ec);
  log->size_ = ec ? 0 : size;
  return log;
}

void RotatingLog::rotate() {
  out_.close();
  std::error_code ec;
  if (keep_ == 0) {
    fs::remove(path_, ec);
  } else {
    fs::remove(fmt::format("{}.{}", path_.string(), keep_), ec);
    for (int i = keep_ - 1; i >= 1; --i) {
      fs::rename(fmt::format("{}.{}", path_.string(), i), fmt::format("{}.{}", path_.string(), i + 1), ec);
    }
    fs::rename(path_, path_.string() + ".1", ec);
  }
  out_.clear();
  out_.open(path_, std::ios::trunc | std::ios::binary);
  size_ = 0;
}

void RotatingLog::write_line(std::string_view line) {
  std::lock_guard lock(mu_);
  const uint64_t n = line.size() + 1;
  if (size_ > 0 && size_ + n > max_bytes_) rotate();
  if (!out_.is_open()) return;
  out_.write(line.data(), static_cast<std::streamsize>(line.size()));
  out_.put('\n');
  out_.flush();  // the log must survive kvgate being killed
  if (out_) {
    size_ += n;
  } else {
    out_.clear();
  }
}

void RotatingLog::flush() {
  std::lock_guard lock(mu_);
  out_.flush();
}

}  // namespace kvgate::engine
