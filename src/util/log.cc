#include "util/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
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
  using namespace std::chrono;
  const auto now = floor<milliseconds>(system_clock::now());
  const auto day = floor<days>(now);
  const year_month_day date{day};
  const hh_mm_ss time{now - day};
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02u-%02uT%02d:%02d:%02d.%03dZ", static_cast<int>(date.year()),
                static_cast<unsigned>(date.month()), static_cast<unsigned>(date.day()), static_cast<int>(time.hours().count()),
                static_cast<int>(time.minutes().count()), static_cast<int>(time.seconds().count()),
                static_cast<int>(time.subseconds().count()));
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
