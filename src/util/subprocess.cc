#include "util/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <cstdlib>
#include <filesystem>

extern char** environ;

namespace kvgate::util {

std::string ExitStatus::describe() const {
  if (signaled()) return "killed by signal " + std::to_string(signal) + " (" + ::strsignal(signal) + ")";
  return "exited with code " + std::to_string(code);
}

Result<std::unique_ptr<Subprocess>> Subprocess::spawn(SpawnOptions options) {
  if (options.argv.empty()) return Error("spawn: empty command line");
  // Build argv and envp before fork: the child must not allocate.
  std::vector<char*> argv;
  for (auto& a : options.argv) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_storage;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view entry(*e);
    const std::string_view name = entry.substr(0, entry.find('='));
    bool drop = options.set_env.count(std::string(name)) > 0;
    for (const auto& prefix : options.unset_env_prefixes) drop = drop || name.substr(0, prefix.size()) == prefix;
    if (!drop) env_storage.emplace_back(entry);
  }
  for (const auto& [k, v] : options.set_env) env_storage.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);

  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return Error(std::string("pipe: ") + std::strerror(errno));
  // A pipe to report exec failure: closed by a successful exec (CLOEXEC).
  int err_pipe[2];
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return Error(std::string("pipe: ") + std::strerror(errno));
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    for (int fd : {fds[0], fds[1], err_pipe[0], err_pipe[1]}) ::close(fd);
    return Error(std::string("fork: ") + std::strerror(err));
  }
  if (pid == 0) {
    // Child: only async-signal-safe calls from here on.
    ::setpgid(0, 0);
    if (options.die_with_parent) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);  // the parent died before prctl
    }
    ::dup2(fds[1], STDOUT_FILENO);
    ::dup2(fds[1], STDERR_FILENO);
    const int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
    // Restore default signal handling for the new program.
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    ::execve(argv[0], argv.data(), envp.data());
    const int err = errno;
    (void)!::write(err_pipe[1], &err, sizeof err);
    ::_exit(127);
  }
  ::close(fds[1]);
  ::close(err_pipe[1]);
  ::setpgid(pid, pid);  // also from the parent, to avoid a race with signal_group()
  int exec_errno = 0;
  const ssize_t n = ::read(err_pipe[0], &exec_errno, sizeof exec_errno);
  ::close(err_pipe[0]);
  if (n == static_cast<ssize_t>(sizeof exec_errno)) {
    ::close(fds[0]);
    ::waitpid(pid, nullptr, 0);
    return Error("cannot run '" + options.argv[0] + "': " + std::strerror(exec_errno));
  }
  return std::unique_ptr<Subprocess>(new Subprocess(pid, fds[0], std::move(options.on_line)));
}

Subprocess::Subprocess(pid_t pid, int out_fd, std::function<void(std::string_view)> on_line)
    : pid_(pid), out_fd_(out_fd), on_line_(std::move(on_line)) {
  reader_ = std::thread([this] { read_output(); });
}

Subprocess::~Subprocess() {
  stop(std::chrono::seconds(2));
}

void Subprocess::read_output() {
  std::string pending;
  char buf[8192];
  for (;;) {
    const ssize_t n = ::read(out_fd_, buf, sizeof buf);
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

bool Subprocess::try_reap(bool block) {
  std::lock_guard lock(mu_);
  if (status_) return true;
  int wstatus = 0;
  const pid_t r = ::waitpid(pid_, &wstatus, block ? 0 : WNOHANG);
  if (r != pid_) return false;
  ExitStatus s;
  if (WIFEXITED(wstatus)) s.code = WEXITSTATUS(wstatus);
  if (WIFSIGNALED(wstatus)) s.signal = WTERMSIG(wstatus);
  status_ = s;
  return true;
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

void Subprocess::signal_group(int sig) {
  {
    std::lock_guard lock(mu_);
    if (status_) {
      // The leader is gone; children it left behind may still be in the group.
      ::kill(-pid_, sig);
      return;
    }
  }
  ::kill(-pid_, sig);
}

ExitStatus Subprocess::stop(std::chrono::milliseconds grace) {
  if (running()) {
    signal_group(SIGTERM);
    signal_group(SIGCONT);  // a stopped (SIGSTOP) child acts on SIGTERM only once continued
    if (!wait_for(grace)) {
      signal_group(SIGKILL);
      try_reap(true);
    }
  }
  signal_group(SIGKILL);  // anything the child left in its group
  if (reader_.joinable()) reader_.join();
  std::lock_guard lock(mu_);
  return status_.value_or(ExitStatus{});
}

std::string shell_quote(std::string_view arg) {
  const bool plain = !arg.empty() && std::all_of(arg.begin(), arg.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || std::string_view("_./=:,+@%-").find(c) != std::string_view::npos;
  });
  if (plain) return std::string(arg);
  std::string out = "'";
  for (char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

bool is_executable_file(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec) && ::access(path.c_str(), X_OK) == 0;
}

std::optional<std::string> find_program(std::string_view name) {
  if (name.find('/') != std::string_view::npos) {
    return is_executable_file(std::string(name)) ? std::optional<std::string>(name) : std::nullopt;
  }
  const char* path = std::getenv("PATH");  // NOLINT(concurrency-mt-unsafe): read-only
  std::string_view rest = path != nullptr ? path : "";
  while (!rest.empty()) {
    const size_t colon = rest.find(':');
    const std::filesystem::path dir(rest.substr(0, colon));
    if (!dir.empty() && is_executable_file((dir / name).string())) return (dir / name).string();
    rest = colon == std::string_view::npos ? "" : rest.substr(colon + 1);
  }
  return std::nullopt;
}

std::string shell_command(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (!out.empty()) out += ' ';
    out += shell_quote(a);
  }
  return out;
}

}  // namespace kvgate::util
