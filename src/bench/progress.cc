#include "bench/progress.h"

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>
#include <unistd.h>

namespace kvgate::bench {

TerminalProgress::TerminalProgress() : TerminalProgress(::isatty(STDERR_FILENO) == 1) {}
TerminalProgress::TerminalProgress(bool enabled) : enabled_(enabled) {}
TerminalProgress::~TerminalProgress() { clear(); }

std::string TerminalProgress::render(size_t done, size_t total, std::string_view label, double elapsed_s,
                                     size_t width) {
  const size_t filled = total == 0 ? 0 : std::min(width, done * width / total);
  std::string bar(filled, '#');
  bar.append(width - filled, '-');
  std::string text(label.substr(0, std::min<size_t>(label.size(), 60)));
  return fmt::format("[{}] {}/{} {:.0f}s {}", bar, done, total, elapsed_s, text);
}

void TerminalProgress::update(size_t done, size_t total, std::string_view label) {
  if (!enabled_) return;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::fprintf(stderr, "\r\033[2K%s", render(done, total, label, elapsed).c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void TerminalProgress::clear() {
  if (!enabled_ || !drawn_) return;
  std::fprintf(stderr, "\r\033[2K");
  std::fflush(stderr);
  drawn_ = false;
}

}  // namespace kvgate::bench
