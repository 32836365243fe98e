#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/subprocess.h"

extern char** environ;

namespace kvgate::util {

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
    for (const auto& prefix : options.unset_env_prefixes)
      drop = drop || name.substr(0, prefix.size()) == prefix;
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

void set_env(const std::string& name, const std::string& value, bool overwrite) {
  ::setenv(name.c_str(), value.c_str(), overwrite ? 1 : 0);
}

Error exec_program(const std::string& program, std::vector<std::string> args) {
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(program.c_str()));  // execv does not write to it
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execv(program.c_str(), argv.data());
  return Error(fmt::format("cannot start {}: {}", program, std::strerror(errno)));
}

Result<std::string> this_executable() {
  std::error_code ec;
  const auto path = std::filesystem::canonical("/proc/self/exe", ec);
  if (ec) return Error("cannot find this program's file: " + ec.message());
  return path.string();
}

bool is_executable_file(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec) && ::access(path.c_str(), X_OK) == 0;
}

std::optional<std::string> find_program(std::string_view name) {
  const char* path = std::getenv("PATH");  // NOLINT(concurrency-mt-unsafe): read-only
  return find_program(name, path != nullptr ? path : "");
}

std::optional<std::string> find_program(std::string_view name, std::string_view path_list) {
  if (name.find('/') != std::string_view::npos) {
    return is_executable_file(std::string(name)) ? std::optional<std::string>(name) : std::nullopt;
  }
  std::string_view rest = path_list;
  while (!rest.empty()) {
    const size_t colon = rest.find(':');
    const std::filesystem::path dir(rest.substr(0, colon));
    if (!dir.empty() && is_executable_file((dir / name).string())) return (dir / name).string();
    rest = colon == std::string_view::npos ? "" : rest.substr(colon + 1);
  }
  return std::nullopt;
}

}  // namespace kvgate::util
