// Elapsed times as the logs, metrics and benchmarks report them: milliseconds as a double,
// from a steady clock; and the wall-clock time answers carry (`created`), in unix seconds.
#pragma once

#include <chrono>
#include <cstdint>

namespace kvgate::util {

// Milliseconds from `from` to `to`.
inline double ms_between(std::chrono::steady_clock::time_point from, std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

// Milliseconds since `t`.
inline double ms_since(std::chrono::steady_clock::time_point t) {
  return ms_between(t, std::chrono::steady_clock::now());
}

// Seconds since the unix epoch, now.
inline int64_t unix_seconds_now() {
  const auto since_epoch = std::chrono::system_clock::now().time_since_epoch();
  return std::chrono::duration_cast<std::chrono::seconds>(since_epoch).count();
}

}  // namespace kvgate::util
