// Progress of a long benchmark, shown on a terminal.
//
// Benchmarks report progress through a ProgressFn (done of total steps, and what they are
// doing now); they never print. TerminalProgress renders it as one self-overwriting line on
// stderr — a bar, the count, the elapsed time and the label — when stderr is a terminal,
// and stays silent otherwise (logs and pipes get no control characters).
//
// Thread-safety: one thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace kvgate::bench {

using ProgressFn = std::function<void(size_t done, size_t total, std::string_view label)>;

class TerminalProgress {
 public:
  // enabled: default whether stderr is a terminal.
  TerminalProgress();
  explicit TerminalProgress(bool enabled);
  ~TerminalProgress();
  void update(size_t done, size_t total, std::string_view label);
  // Clears the line (before other output, and at the end).
  void clear();
  ProgressFn callback() {
    return [this](size_t d, size_t t, std::string_view l) { update(d, t, l); };
  }
  // The line update() draws (without the leading carriage return), for tests.
  static std::string render(size_t done, size_t total, std::string_view label, double elapsed_s,
                            size_t width = 24);

 private:
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace kvgate::bench
