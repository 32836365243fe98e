// What util::Subprocess does the same on every platform: reading the child's output into
// lines, waiting, and the shell quoting of command lines for logs. The rest is in
// subprocess_posix.cc and subprocess_windows.cc.
#include "util/subprocess.h"

#ifdef _WIN32
#include <io.h>  // _read/_close on the C descriptor of the output pipe
#else
#include <unistd.h>
#endif

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace kvgate::util {

std::string ExitStatus::describe() const {
#ifdef _WIN32
  if (signaled()) return "killed by signal " + std::to_string(signal);
  // Windows reports a crash as an NTSTATUS exit code: 0xC0000005 reads better in hex.
  if (static_cast<unsigned>(code) >= 0xC0000000u)
    return fmt::format("exited with code {:#x}", static_cast<unsigned>(code));
#else
  if (signaled()) return "killed by signal " + std::to_string(signal) + " (" + ::strsignal(signal) + ")";
#endif
  return "exited with code " + std::to_string(code);
}

Subprocess::Subprocess(pid_t pid, int out_fd, std::function<void(std::string_view)> on_line)
    : pid_(pid), out_fd_(out_fd), on_line_(std::move(on_line)) {
  reader_ = std::thread([this] { read_output(); });
}

Subprocess::~Subprocess() { stop(std::chrono::seconds(2)); }

void Subprocess::read_output() {
  std::string pending;
  char buf[8192];
  for (;;) {
    const auto n = ::read(out_fd_, buf, static_cast<unsigned>(sizeof buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    pending.append(buf, static_cast<size_t>(n));
    size_t start = 0;
    for (size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1) {
      if (on_line_) on_line_(std::string_view(pending).substr(start, nl - start));
    }
    pending.erase(0, start);
  }
  if (!pending.empty() && on_line_) on_line_(pending);
  ::close(out_fd_);
}

bool Subprocess::running() { return !try_reap(false); }

std::optional<ExitStatus> Subprocess::exit_status() {
  try_reap(false);
  std::lock_guard lock(mu_);
  return status_;
}

std::optional<ExitStatus> Subprocess::wait_for(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!try_reap(false)) {
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return exit_status();
}

std::string shell_quote(std::string_view arg) {
  const bool plain = !arg.empty() && std::all_of(arg.begin(), arg.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 ||
           std::string_view("_./=:,+@%-").find(c) != std::string_view::npos;
  });
  if (plain) return std::string(arg);
  std::string out = "'";
  for (char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string windows_quote(std::string_view arg) {
  if (!arg.empty() && arg.find_first_of(" \t\n\v\"") == std::string_view::npos) return std::string(arg);
  std::string out = "\"";
  size_t backslashes = 0;
  for (char c : arg) {
    if (c == '\\') {
      ++backslashes;
      continue;
    }
    out.append(c == '"' ? backslashes * 2 + 1 : backslashes, '\\');
    backslashes = 0;
    out += c;
  }
  out.append(backslashes * 2, '\\');
  return out + "\"";
}

std::string shell_command(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (!out.empty()) out += ' ';
    out += shell_quote(a);
  }
  return out;
}

std::string windows_command(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (!out.empty()) out += ' ';
    out += windows_quote(a);
  }
  return out;
}

}  // namespace kvgate::util
