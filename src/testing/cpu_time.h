// Test support: the CPU time the calling thread has used. A test that bounds the work of a
// computation (a parser that must stay linear on adversarial input) measures this rather than
// the wall clock, which a loaded machine stretches by however long the thread waits for a core.
// Header-only, like eventually.h.
#pragma once

#include <chrono>
#include <ctime>

namespace kvgate::testing {

inline std::chrono::nanoseconds thread_cpu_time() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

// Milliseconds of this thread's CPU time `f()` takes.
template <typename F>
double cpu_ms(F f) {
  const auto t0 = thread_cpu_time();
  f();
  return std::chrono::duration<double, std::milli>(thread_cpu_time() - t0).count();
}

}  // namespace kvgate::testing
