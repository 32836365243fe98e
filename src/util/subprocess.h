// Subprocess: a child process in its own process group, with its stdout and stderr read
// line by line (move-only RAII).
//
// POSIX (subprocess_posix.cc): fork/exec; the child gets its own process group (so stop()
// reaches every process it spawns) and, on Linux, a parent-death signal (SIGKILL), so it
// cannot outlive kvgate even when kvgate is killed with SIGKILL.
// Windows (subprocess_windows.cc): CreateProcessW into a job object that is killed when its
// last handle closes (kvgate's, also when kvgate is killed), without a console of its own or
// kvgate's (so the child cannot change the console's code page), inheriting only its output
// pipe. Signals map to what Windows can do: SIGTERM, SIGINT, SIGHUP and SIGKILL end the job;
// SIGSTOP and SIGCONT suspend and resume the child; others are ignored.
// Environment variables can be removed by prefix (e.g. "LLAMA_ARG_") or set.
//
// Output: both streams go into one pipe; a reader thread splits it into lines and calls
// `on_line` (if given) for each, in order, from that thread. The destructor stops the
// process group (SIGTERM, then SIGKILL after the grace period) and joins the reader.
//
// Thread-safety: running()/exit_status()/stop() may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <sys/types.h>

#include "util/result.h"

namespace kvgate::util {

struct SpawnOptions {
  std::vector<std::string> argv;  // argv[0] is the program path
  std::vector<std::string> unset_env_prefixes;
  std::map<std::string, std::string> set_env;
  std::function<void(std::string_view line)> on_line;
  bool die_with_parent = true;
};

// How a finished child ended: exited with `code`, or was killed by `signal`.
struct ExitStatus {
  int code = 0;
  int signal = 0;
  bool signaled() const { return signal != 0; }
  std::string describe() const;
};

class Subprocess {
 public:
  static Result<std::unique_ptr<Subprocess>> spawn(SpawnOptions options);

  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;
  ~Subprocess();

  pid_t pid() const { return pid_; }
  // Non-blocking: true until the child has exited (reaps it when it has).
  bool running();
  // Set once the child has exited and been reaped.
  std::optional<ExitStatus> exit_status();
  // Waits up to `timeout` for exit; returns the status if it exited.
  std::optional<ExitStatus> wait_for(std::chrono::milliseconds timeout);
  // Sends `sig` to the whole process group.
  void signal_group(int sig);
  // SIGTERM (and SIGCONT, for a stopped child) to the group, SIGKILL after `grace`; waits
  // for exit and for the output reader.
  ExitStatus stop(std::chrono::milliseconds grace = std::chrono::seconds(5));

 private:
  Subprocess(pid_t pid, int out_fd, std::function<void(std::string_view)> on_line);
  void read_output();
  bool try_reap(bool block);

  pid_t pid_;
  int out_fd_;
  std::function<void(std::string_view)> on_line_;
  std::thread reader_;
  std::mutex mu_;
  std::optional<ExitStatus> status_;  // guarded by mu_
#ifdef _WIN32
  void* process_ = nullptr;       // HANDLE of the child
  void* job_ = nullptr;           // HANDLE of its job object
  std::atomic<int> ended_by_{0};  // the signal that ended the job, reported as the exit's
#endif
};

// `arg` as a POSIX shell reads it back as one word: unchanged when it holds only letters,
// digits and `_./=:,+@%-`, else in single quotes (a quote inside becomes '\'').
std::string shell_quote(std::string_view arg);
// The command line `argv` as one shell-ready string (each argument shell_quote()d).
std::string shell_command(const std::vector<std::string>& argv);

// Sets the environment variable `name` of this process (keeps a present value unless
// `overwrite`). For a command about to hand over to another program (exec_program).
void set_env(const std::string& name, const std::string& value, bool overwrite);

// Hands this process over to `program` with `args` (argv[1..]): POSIX execv, so it returns
// only on failure; Windows has no exec, so the program runs with this console and this
// process exits with its exit code when it ends (a .cmd/.bat, as npm installs CLIs, runs
// through cmd.exe).
Error exec_program(const std::string& program, std::vector<std::string> args);

// The running program's own file (POSIX: /proc/self/exe resolved; Windows: its module file).
Result<std::string> this_executable();

// `arg` as the Windows C runtime (CommandLineToArgvW) reads it back as one argument: unchanged
// when it holds no space, tab or quote, else in double quotes with backslashes doubled only
// before a quote. Pure; used on every platform (for Windows task files).
std::string windows_quote(std::string_view arg);
// The command line `argv` as one string each argument windows_quote()d (what CreateProcess
// passes, and cmd.exe reads back for arguments without its own metacharacters).
std::string windows_command(const std::vector<std::string>& argv);

// Whether `path` is a regular file this process may execute (Windows: a file whose name ends
// in .exe, .com, .bat or .cmd).
bool is_executable_file(const std::string& path);
// The executable regular file `name` names: as given when it holds a '/' (Windows: '/' or
// '\\'), else the first in the folders of $PATH (Windows: `name`, then with each of
// %PATHEXT%'s endings, in each folder of %PATH%). nullopt when there is none.
std::optional<std::string> find_program(std::string_view name);
// The same search in the folders of `path_list` (a PATH value: ':'-separated, Windows ';').
std::optional<std::string> find_program(std::string_view name, std::string_view path_list);

}  // namespace kvgate::util
