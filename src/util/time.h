// Elapsed times as the logs, metrics and benchmarks report them: milliseconds as a double,
// from a steady clock.
#pragma once

#include <chrono>

namespace kvgate::util {

// Milliseconds from `from` to `to`.
inline double ms_between(std::chrono::steady_clock::time_point from, std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

// Milliseconds since `t`.
inline double ms_since(std::chrono::steady_clock::time_point t) {
  return ms_between(t, std::chrono::steady_clock::now());
}

}  // namespace kvgate::util
