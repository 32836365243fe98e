#include <atomic>
#include <string>

#include <fmt/format.h>
#include <windows.h>

#include "util/stop_signals.h"
#include "util/windows_error.h"

namespace kvgate::util {

namespace {

HANDLE g_console_event = nullptr;  // set by the console control handler
HANDLE g_request_event = nullptr;  // "Local\kvgate-stop-PID", set by request_stop()
std::atomic<DWORD> g_last_event{0};

std::wstring event_name(DWORD pid) { return widen(fmt::format("Local\\kvgate-stop-{}", pid)); }

BOOL WINAPI on_console_event(DWORD type) {
  if (type != CTRL_C_EVENT && type != CTRL_BREAK_EVENT && type != CTRL_CLOSE_EVENT) return FALSE;
  g_last_event = type;
  ::SetEvent(g_console_event);
  // The console's close event ends the process when the handler returns: give the main
  // thread a moment to stop the engine first.
  if (type == CTRL_CLOSE_EVENT) ::Sleep(5000);
  return TRUE;
}

}  // namespace

StopSignals StopSignals::install() {
  g_console_event = ::CreateEventW(nullptr, TRUE, FALSE, nullptr);
  g_request_event = ::CreateEventW(nullptr, TRUE, FALSE, event_name(::GetCurrentProcessId()).c_str());
  ::SetConsoleCtrlHandler(on_console_event, TRUE);
  return StopSignals();
}

std::optional<std::string> StopSignals::wait(std::chrono::milliseconds timeout) const {
  const HANDLE events[2] = {g_console_event, g_request_event};
  const DWORD r = ::WaitForMultipleObjects(2, events, FALSE, static_cast<DWORD>(timeout.count()));
  if (r == WAIT_OBJECT_0 + 1) return std::string("a stop request");
  if (r != WAIT_OBJECT_0) return std::nullopt;
  switch (g_last_event.load()) {
    case CTRL_BREAK_EVENT:
      return std::string("Ctrl-Break");
    case CTRL_CLOSE_EVENT:
      return std::string("the console closing");
    default:
      return std::string("Ctrl-C");
  }
}

Status request_stop(pid_t pid) {
  HANDLE event = ::OpenEventW(EVENT_MODIFY_STATE, FALSE, event_name(static_cast<DWORD>(pid)).c_str());
  if (event == nullptr) return Error(fmt::format("cannot reach pid {}: {}", pid, last_windows_error()));
  const BOOL ok = ::SetEvent(event);
  ::CloseHandle(event);
  if (!ok) return Error(fmt::format("cannot signal pid {}: {}", pid, last_windows_error()));
  return {};
}

}  // namespace kvgate::util
