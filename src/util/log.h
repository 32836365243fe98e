// Structured logging: one JSON object per line on stderr, e.g.
//   {"ts":"2026-11-29T23:59:01.123Z","level":"info","event":"request","route":"chat",...}
// Every line carries a timestamp, level and event name; callers add fields. Lines are
// written whole under a mutex (thread-safe). The minimum level comes from KVGATE_LOG
// (debug, info, warn, error; default info) or set_log_level().
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

namespace kvgate::util {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

void set_log_level(LogLevel level);
bool log_enabled(LogLevel level);
void log_event(LogLevel level, std::string_view event, nlohmann::json fields = nlohmann::json::object());

}  // namespace kvgate::util
