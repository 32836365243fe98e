// util::Subprocess on Windows (see subprocess.h for what maps to what).
// <windows.h> first: the headers after it need its types.
// clang-format off
#include <windows.h>
#include <tlhelp32.h>
// clang-format on

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <fcntl.h>
#include <fmt/format.h>
#include <io.h>

#include "util/signals.h"
#include "util/subprocess.h"
#include "util/windows_error.h"

namespace kvgate::util {

namespace {

std::wstring command_line(const std::vector<std::string>& argv) { return widen(windows_command(argv)); }

// The child's environment block: kvgate's, less the removed prefixes, plus the set values.
std::wstring environment_block(const SpawnOptions& o) {
  std::vector<std::wstring> entries;
  wchar_t* env = ::GetEnvironmentStringsW();
  for (const wchar_t* e = env; *e != L'\0'; e += std::wcslen(e) + 1) {
    const std::string entry = narrow(e);
    const std::string name = entry.substr(0, entry.find('=', 1));  // "=C:=C:\" entries start with '='
    bool drop = o.set_env.count(name) > 0;
    for (const auto& prefix : o.unset_env_prefixes) drop = drop || name.rfind(prefix, 0) == 0;
    if (!drop) entries.emplace_back(e);
  }
  ::FreeEnvironmentStringsW(env);
  for (const auto& [k, v] : o.set_env) entries.push_back(widen(k + "=" + v));
  std::wstring block;
  for (const auto& e : entries) block += e + L'\0';
  return block + L'\0';
}

// A job that kills its processes when its last handle (kvgate's) closes.
HANDLE make_job(bool die_with_parent) {
  HANDLE job = ::CreateJobObjectW(nullptr, nullptr);
  if (job != nullptr && die_with_parent) {
    JOBOBJECT_EXTENDED_LIMIT_INFORMATION limits{};
    limits.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
    ::SetInformationJobObject(job, JobObjectExtendedLimitInformation, &limits, sizeof limits);
  }
  return job;
}

struct Handles {
  HANDLE read = nullptr, write = nullptr, null_in = nullptr;
  ~Handles() {
    for (HANDLE h : {read, write, null_in}) {
      if (h != nullptr && h != INVALID_HANDLE_VALUE) ::CloseHandle(h);
    }
  }
};

// Suspends or resumes every thread of `pid` (SIGSTOP / SIGCONT).
void suspend_threads(DWORD pid, bool suspend) {
  HANDLE snap = ::CreateToolhelp32Snapshot(TH32CS_SNAPTHREAD, 0);
  if (snap == INVALID_HANDLE_VALUE) return;
  THREADENTRY32 t{};
  t.dwSize = sizeof t;
  for (BOOL more = ::Thread32First(snap, &t); more; more = ::Thread32Next(snap, &t)) {
    if (t.th32OwnerProcessID != pid) continue;
    if (HANDLE th = ::OpenThread(THREAD_SUSPEND_RESUME, FALSE, t.th32ThreadID)) {
      if (suspend) {
        ::SuspendThread(th);
      } else {
        ::ResumeThread(th);
      }
      ::CloseHandle(th);
    }
  }
  ::CloseHandle(snap);
}

}  // namespace

Result<std::unique_ptr<Subprocess>> Subprocess::spawn(SpawnOptions options) {
  if (options.argv.empty()) return Error("spawn: empty command line");
  Handles h;
  SECURITY_ATTRIBUTES inherit{sizeof(SECURITY_ATTRIBUTES), nullptr, TRUE};
  if (!::CreatePipe(&h.read, &h.write, &inherit, 0)) return Error("pipe: " + last_windows_error());
  ::SetHandleInformation(h.read, HANDLE_FLAG_INHERIT, 0);
  h.null_in = ::CreateFileW(L"NUL", GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_WRITE, &inherit, OPEN_EXISTING,
                            0, nullptr);

  // Only the pipe and NUL are inherited, whatever else kvgate has open (sockets, logs).
  HANDLE inherited[2] = {h.write, h.null_in};
  SIZE_T attr_size = 0;
  ::InitializeProcThreadAttributeList(nullptr, 1, 0, &attr_size);
  std::vector<char> attr_storage(attr_size);
  auto* attrs = reinterpret_cast<LPPROC_THREAD_ATTRIBUTE_LIST>(attr_storage.data());
  ::InitializeProcThreadAttributeList(attrs, 1, 0, &attr_size);
  ::UpdateProcThreadAttribute(attrs, 0, PROC_THREAD_ATTRIBUTE_HANDLE_LIST, inherited,
                              h.null_in != INVALID_HANDLE_VALUE ? sizeof inherited : sizeof(HANDLE), nullptr,
                              nullptr);

  STARTUPINFOEXW si{};
  si.StartupInfo.cb = sizeof si;
  si.StartupInfo.dwFlags = STARTF_USESTDHANDLES;
  si.StartupInfo.hStdOutput = h.write;
  si.StartupInfo.hStdError = h.write;
  si.StartupInfo.hStdInput = h.null_in != INVALID_HANDLE_VALUE ? h.null_in : nullptr;
  std::wstring cmd = command_line(options.argv);
  std::wstring env = environment_block(options);
  const std::wstring program = widen(options.argv[0]);
  PROCESS_INFORMATION pi{};
  // CREATE_NO_WINDOW: no console at all, so nothing the child does (SetConsoleOutputCP, as
  // llama-server --list-devices does) reaches the console kvgate writes to. Suspended until
  // it is in its job, so nothing it starts escapes the job.
  const DWORD flags =
      CREATE_UNICODE_ENVIRONMENT | CREATE_SUSPENDED | CREATE_NO_WINDOW | EXTENDED_STARTUPINFO_PRESENT;
  const BOOL ok = ::CreateProcessW(program.c_str(), cmd.data(), nullptr, nullptr, TRUE, flags, env.data(),
                                   nullptr, &si.StartupInfo, &pi);
  ::DeleteProcThreadAttributeList(attrs);
  if (!ok) return Error("cannot run '" + options.argv[0] + "': " + last_windows_error());
  HANDLE job = make_job(options.die_with_parent);
  if (job != nullptr) ::AssignProcessToJobObject(job, pi.hProcess);
  ::ResumeThread(pi.hThread);
  ::CloseHandle(pi.hThread);
  ::CloseHandle(h.write);
  h.write = nullptr;
  const int out_fd = ::_open_osfhandle(reinterpret_cast<intptr_t>(h.read), _O_RDONLY | _O_BINARY);
  h.read = nullptr;  // owned by the C descriptor now
  auto child = std::unique_ptr<Subprocess>(
      new Subprocess(static_cast<pid_t>(pi.dwProcessId), out_fd, std::move(options.on_line)));
  child->process_ = pi.hProcess;
  child->job_ = job;
  return child;
}

bool Subprocess::try_reap(bool block) {
  std::lock_guard lock(mu_);
  if (status_) return true;
  if (::WaitForSingleObject(process_, block ? INFINITE : 0) != WAIT_OBJECT_0) return false;
  DWORD code = 0;
  ::GetExitCodeProcess(process_, &code);
  ExitStatus s;
  s.code = static_cast<int>(code);
  if (const int sig = ended_by_.load(); sig != 0 && code == static_cast<DWORD>(128 + sig)) {
    s = ExitStatus{.code = 0, .signal = sig};
  }
  status_ = s;
  return true;
}

void Subprocess::signal_group(int sig) {
  switch (sig) {
    case SIGTERM:
    case SIGINT:
    case SIGHUP:
    case SIGKILL: {
      int none = 0;
      ended_by_.compare_exchange_strong(none, sig);
      // The job: the child and everything it started; 128 + signal, as a shell reports it.
      if (job_ == nullptr || !::TerminateJobObject(job_, static_cast<UINT>(128 + sig))) {
        ::TerminateProcess(process_, static_cast<UINT>(128 + sig));
      }
      break;
    }
    case SIGSTOP:
    case SIGCONT:
      suspend_threads(static_cast<DWORD>(pid_), sig == SIGSTOP);
      break;
    default:
      break;
  }
}

ExitStatus Subprocess::stop(std::chrono::milliseconds grace) {
  // Windows has no polite stop for a process without a console: the job ends at once.
  (void)grace;
  if (running()) {
    signal_group(SIGKILL);
    try_reap(true);
  }
  if (reader_.joinable()) reader_.join();
  if (job_ != nullptr) ::CloseHandle(job_);
  if (process_ != nullptr) ::CloseHandle(process_);
  job_ = process_ = nullptr;
  std::lock_guard lock(mu_);
  return status_.value_or(ExitStatus{});
}

void set_env(const std::string& name, const std::string& value, bool overwrite) {
  if (!overwrite && std::getenv(name.c_str()) != nullptr) return;  // NOLINT(concurrency-mt-unsafe)
  ::_putenv_s(name.c_str(), value.c_str());
}

Error exec_program(const std::string& program, std::vector<std::string> args) {
  std::string ext = std::filesystem::path(program).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  std::vector<std::string> argv{program};
  argv.insert(argv.end(), args.begin(), args.end());
  std::wstring cmd = command_line(argv);
  std::wstring app = widen(program);
  if (ext == ".cmd" || ext == ".bat") {
    // cmd.exe /s /c "..." reads the rest of the line as one command, quotes and all.
    cmd = L"cmd.exe /d /s /c \"" + cmd + L"\"";
    app.clear();
  }
  STARTUPINFOW si{};
  si.cb = sizeof si;
  PROCESS_INFORMATION pi{};
  if (!::CreateProcessW(app.empty() ? nullptr : app.c_str(), cmd.data(), nullptr, nullptr, TRUE, 0, nullptr,
                        nullptr, &si, &pi)) {
    return Error(fmt::format("cannot start {}: {}", program, last_windows_error()));
  }
  ::CloseHandle(pi.hThread);
  // Ctrl-C reaches both (one console); the program decides what it means, this process waits.
  ::SetConsoleCtrlHandler(nullptr, TRUE);
  ::WaitForSingleObject(pi.hProcess, INFINITE);
  DWORD code = 1;
  ::GetExitCodeProcess(pi.hProcess, &code);
  std::fflush(nullptr);
  std::exit(static_cast<int>(code));  // atexit: the console pumps finish
}

Result<std::string> this_executable() {
  wchar_t path[MAX_PATH];
  const DWORD n = ::GetModuleFileNameW(nullptr, path, MAX_PATH);
  if (n == 0 || n == MAX_PATH) return Error("cannot find this program's file: " + last_windows_error());
  return narrow(std::wstring_view(path, n));
}

bool is_executable_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  std::string ext = std::filesystem::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext == ".exe" || ext == ".com" || ext == ".bat" || ext == ".cmd";
}

std::optional<std::string> find_program(std::string_view name) {
  const char* path = std::getenv("PATH");  // NOLINT(concurrency-mt-unsafe): read-only
  return find_program(name, path != nullptr ? path : "");
}

std::optional<std::string> find_program(std::string_view name, std::string_view path_list) {
  const auto with_endings = [](const std::filesystem::path& p) -> std::optional<std::string> {
    if (is_executable_file(p.string())) return p.string();
    const char* pathext = std::getenv("PATHEXT");  // NOLINT(concurrency-mt-unsafe): read-only
    std::string_view rest = pathext != nullptr ? pathext : ".COM;.EXE;.BAT;.CMD";
    while (!rest.empty()) {
      const size_t semi = rest.find(';');
      const std::string candidate = p.string() + std::string(rest.substr(0, semi));
      if (is_executable_file(candidate)) return candidate;
      rest = semi == std::string_view::npos ? "" : rest.substr(semi + 1);
    }
    return std::nullopt;
  };
  if (name.find_first_of("/\\") != std::string_view::npos) return with_endings(std::filesystem::path(name));
  std::string_view rest = path_list;
  while (!rest.empty()) {
    const size_t semi = rest.find(';');
    const std::filesystem::path dir(rest.substr(0, semi));
    if (!dir.empty()) {
      if (auto found = with_endings(dir / name)) return found;
    }
    rest = semi == std::string_view::npos ? "" : rest.substr(semi + 1);
  }
  return std::nullopt;
}

}  // namespace kvgate::util
