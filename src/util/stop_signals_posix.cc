#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <pthread.h>
#include <signal.h>

#include "util/stop_signals.h"

namespace kvgate::util {

namespace {

sigset_t stop_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  return set;
}

}  // namespace

StopSignals StopSignals::install() {
  const sigset_t set = stop_set();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return StopSignals();
}

std::optional<std::string> StopSignals::wait(std::chrono::milliseconds timeout) const {
  const sigset_t set = stop_set();
  siginfo_t info{};
  const auto s = std::chrono::duration_cast<std::chrono::seconds>(timeout);
  const timespec tick{static_cast<time_t>(s.count()),
                      static_cast<long>(std::chrono::nanoseconds(timeout - s).count())};
  const int sig = ::sigtimedwait(&set, &info, &tick);
  if (sig <= 0) return std::nullopt;
  return std::string(::strsignal(sig));
}

Status request_stop(pid_t pid) {
  if (::kill(pid, SIGTERM) != 0)
    return Error(fmt::format("cannot signal pid {}: {}", pid, std::strerror(errno)));
  return {};
}

}  // namespace kvgate::util
