#include "util/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <string>

#include "util/json.h"

namespace kvgate::util {
namespace {

LogLevel initial_level() {
  const char* env = std::getenv("KVGATE_LOG");  // NOLINT(concurrency-mt-unsafe): read once at start
  const std::string v = env ? env : "";
  if (v == "debug") return LogLevel::kDebug;
  if (v == "warn") return LogLevel::kWarn;
  if (v == "error") return LogLevel::kError;
  return LogLevel::kInfo;
}

std::atomic<int>& level_ref() {
  static std::atomic<int> level{static_cast<int>(initial_level())};
  return level;
}

std::string timestamp() {
  const auto now = std::chrono::system_clock::now();
  const auto t = std::chrono::system_clock::to_time_t(now);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
  return buf;
}

const char* level_name(LogLevel l) {
  switch (l) {
    case LogLevel::kDebug: return "debug";
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarn: return "warn";
    case LogLevel::kError: return "error";
  }
  return "info";
}

}  // namespace

void set_log_level(LogLevel level) { level_ref() = static_cast<int>(level); }

bool log_enabled(LogLevel level) { return static_cast<int>(level) >= level_ref().load(); }

void log_event(LogLevel level, std::string_view event, nlohmann::json fields) {
  if (!log_enabled(level)) return;
  nlohmann::json line = {{"ts", timestamp()}, {"level", level_name(level)}, {"event", event}};
  if (fields.is_object()) {
    for (auto& [k, v] : fields.items()) line[k] = std::move(v);
  }
  const std::string text = util::json_text(line) + "\n";
  static std::mutex mu;
  std::lock_guard lock(mu);
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
}

}  // namespace kvgate::util
