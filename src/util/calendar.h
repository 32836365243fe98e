// The calendar fields of a time_t, in UTC or local time, thread-safe on every platform
// (gmtime_r/localtime_r on POSIX, gmtime_s/localtime_s with their arguments swapped on Windows).
#pragma once

#include <ctime>

namespace kvgate::util {

inline std::tm utc_calendar(std::time_t t) {
  std::tm tm{};
#ifdef _WIN32
  ::gmtime_s(&tm, &t);
#else
  ::gmtime_r(&t, &tm);
#endif
  return tm;
}

inline std::tm local_calendar(std::time_t t) {
  std::tm tm{};
#ifdef _WIN32
  ::localtime_s(&tm, &t);
#else
  ::localtime_r(&t, &tm);
#endif
  return tm;
}

}  // namespace kvgate::util
