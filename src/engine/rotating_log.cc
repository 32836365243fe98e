#include "engine/rotating_log.h"

#include <fmt/format.h>

#include "util/private_files.h"

namespace kvgate::engine {

namespace fs = std::filesystem;

Result<std::unique_ptr<RotatingLog>> RotatingLog::open(fs::path path, uint64_t max_bytes, int keep) {
  if (max_bytes == 0) return Error("log size limit must be positive");
  if (keep < 0) return Error("the number of rotated logs to keep cannot be negative");
  // The engine's output quotes prompts and errors: owner-only, like the session store.
  const std::string what = fmt::format("cannot open log file '{}'", path.string());
  if (path.has_parent_path()) KV_TRY(util::make_private_dir(path.parent_path()).with_context(what));
  KV_TRY(util::make_private_file(path).with_context(what));
  std::error_code ec;
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
  (void)util::make_private_file(path_);  // the new file starts 0600 (a failure shows as a closed log)
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
