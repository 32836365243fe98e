// <windows.h> first: the headers after it need its types.
// clang-format off
#include <windows.h>
#include <shellapi.h>
// clang-format on

#include <cstdio>
#include <cstdlib>
#include <thread>

#include <fcntl.h>
#include <io.h>

#include "util/console.h"
#include "util/utf8.h"
#include "util/windows_error.h"

namespace kvgate::util {

namespace {

bool is_console(HANDLE h) {
  DWORD mode = 0;
  return h != nullptr && h != INVALID_HANDLE_VALUE && ::GetConsoleMode(h, &mode) != 0;
}

// A pipe in place of C descriptor `fd`, drained by a thread into the console `console`.
struct Pump {
  HANDLE console = nullptr;
  HANDLE read = nullptr;
  std::thread thread;
};

Pump g_pumps[2];

void drain(Pump& p) {
  std::string pending;
  char buf[4096];
  DWORD n = 0;
  while (::ReadFile(p.read, buf, sizeof buf, &n, nullptr) && n > 0) {
    pending.append(buf, n);
    const size_t whole = complete_utf8_prefix(pending);
    write_text(p.console, std::string_view(pending).substr(0, whole));
    pending.erase(0, whole);
  }
  if (!pending.empty()) write_text(p.console, pending);
}

// Redirects C descriptor `fd` (1 or 2) and its std handle into a pump when it is a console.
void pump_if_console(int fd, DWORD std_id, Pump& p) {
  HANDLE console = ::GetStdHandle(std_id);
  if (!is_console(console)) return;
  HANDLE read = nullptr, write = nullptr;
  if (!::CreatePipe(&read, &write, nullptr, 0)) return;
  const int pipe_fd = ::_open_osfhandle(reinterpret_cast<intptr_t>(write), _O_WRONLY | _O_BINARY);
  if (pipe_fd < 0 || ::_dup2(pipe_fd, fd) != 0) return;
  ::_close(pipe_fd);
  ::SetStdHandle(std_id, reinterpret_cast<HANDLE>(::_get_osfhandle(fd)));
  p.console = console;
  p.read = read;
  p.thread = std::thread([&p] { drain(p); });
}

// At exit: flush, close the pipes' write ends (the C descriptors), let the pumps finish.
void finish_pumps() {
  std::fflush(stdout);
  std::fflush(stderr);
  for (int fd : {1, 2}) {
    Pump& p = g_pumps[fd - 1];
    if (!p.thread.joinable()) continue;
    ::_close(fd);
    p.thread.join();
  }
}

}  // namespace

bool write_text(void* handle, std::string_view text) {
  HANDLE h = static_cast<HANDLE>(handle);
  if (text.empty()) return true;
  if (is_console(h)) {
    const std::wstring wide = widen(text);
    DWORD written = 0;
    return ::WriteConsoleW(h, wide.data(), static_cast<DWORD>(wide.size()), &written, nullptr) != 0;
  }
  DWORD written = 0;
  return ::WriteFile(h, text.data(), static_cast<DWORD>(text.size()), &written, nullptr) != 0;
}

std::vector<std::string> init_console(int argc, char** argv) {
  ::_setmode(1, _O_BINARY);
  ::_setmode(2, _O_BINARY);
  pump_if_console(1, STD_OUTPUT_HANDLE, g_pumps[0]);
  pump_if_console(2, STD_ERROR_HANDLE, g_pumps[1]);
  if (g_pumps[0].thread.joinable() || g_pumps[1].thread.joinable()) std::atexit(finish_pumps);
  std::vector<std::string> args;
  int n = 0;
  wchar_t** wide = ::CommandLineToArgvW(::GetCommandLineW(), &n);
  if (wide == nullptr) return std::vector<std::string>(argv, argv + argc);
  for (int i = 0; i < n; ++i) args.push_back(narrow(wide[i]));
  ::LocalFree(wide);
  return args;
}

}  // namespace kvgate::util
