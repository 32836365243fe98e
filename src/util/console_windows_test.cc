// util::write_text: a console gets UTF-16 through WriteConsoleW and keeps its code page; a pipe
// or a file gets the UTF-8 bytes unchanged.
// <windows.h> first: the headers after it need its types.
// clang-format off
#include <windows.h>
// clang-format on

#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "util/console.h"
#include "util/windows_error.h"

namespace kvgate::util {
namespace {

const std::string kText = "plan: 27B 中文 — ok ✓\n";

TEST(ConsoleTextTest, APipeGetsTheUtf8Bytes) {
  HANDLE read = nullptr, write = nullptr;
  ASSERT_TRUE(::CreatePipe(&read, &write, nullptr, 0));
  ASSERT_TRUE(write_text(write, kText));
  ::CloseHandle(write);
  std::string got(256, '\0');
  DWORD n = 0;
  ASSERT_TRUE(::ReadFile(read, got.data(), static_cast<DWORD>(got.size()), &n, nullptr));
  ::CloseHandle(read);
  got.resize(n);
  EXPECT_EQ(got, kText);  // no CR added, no code-page conversion
}

// ProcThreadAttributePseudoConsole (winbase.h), hidden like the functions below NTDDI_WIN10_RS5.
constexpr DWORD kPseudoConsoleAttribute = 22;

// Set in the child that the test below starts on a pseudo console.
constexpr const char* kChildVariable = "KVGATE_CONSOLE_TEST_CHILD";

// The check itself, in a process with a console: a screen buffer of a console on the GBK code
// page gets the characters, and the code page stays.
void check_console_text() {
  ::SetConsoleOutputCP(936);  // as a Chinese Windows starts a console
  const UINT before = ::GetConsoleOutputCP();
  HANDLE buffer =
      ::CreateConsoleScreenBuffer(GENERIC_READ | GENERIC_WRITE, 0, nullptr, CONSOLE_TEXTMODE_BUFFER, nullptr);
  ASSERT_NE(buffer, INVALID_HANDLE_VALUE) << last_windows_error();
  ASSERT_TRUE(write_text(buffer, "plan: 27B 中文 ✓"));
  const std::wstring expected = L"plan: 27B 中文 ✓";
  std::wstring got(expected.size(), L'\0');
  DWORD n = 0;
  ASSERT_TRUE(
      ::ReadConsoleOutputCharacterW(buffer, got.data(), static_cast<DWORD>(got.size()), COORD{0, 0}, &n));
  ::CloseHandle(buffer);
  got.resize(n);
  EXPECT_EQ(narrow(got), narrow(expected));
  // And the console's own screen (CONOUT$, whatever the standard handles are): what the
  // terminal shows.
  HANDLE screen = ::CreateFileW(L"CONOUT$", GENERIC_READ | GENERIC_WRITE, FILE_SHARE_READ | FILE_SHARE_WRITE,
                                nullptr, OPEN_EXISTING, 0, nullptr);
  ASSERT_NE(screen, INVALID_HANDLE_VALUE) << last_windows_error();
  ASSERT_TRUE(write_text(screen, "console says: 中文 ✓\n"));
  ::CloseHandle(screen);
  EXPECT_EQ(::GetConsoleOutputCP(), before) << "the console's code page was changed";
}

struct PseudoConsoleRun {
  DWORD exit_code = 1;
  std::string output;  // what the pseudo console sent to its terminal (UTF-8 and VT sequences)
};

// Runs this test again in a child on a new pseudo console (ConPTY): the way a terminal runs
// kvgate, and a console that can be made where AllocConsole cannot (a headless wine).
std::optional<PseudoConsoleRun> run_on_pseudo_console(std::string& why) {
  HANDLE in_read = nullptr, in_write = nullptr, out_read = nullptr, out_write = nullptr;
  if (!::CreatePipe(&in_read, &in_write, nullptr, 0) || !::CreatePipe(&out_read, &out_write, nullptr, 0)) {
    why = "CreatePipe: " + last_windows_error();
    return std::nullopt;
  }
  // Looked up, not linked: Windows 10 1809 and wine 6 have it, the SDK headers hide it below
  // NTDDI_WIN10_RS5.
  using CreateFn = HRESULT(WINAPI*)(COORD, HANDLE, HANDLE, DWORD, void**);
  using CloseFn = void(WINAPI*)(void*);
  const HMODULE kernel = ::GetModuleHandleW(L"kernel32.dll");
  const auto create =
      reinterpret_cast<CreateFn>(reinterpret_cast<void*>(::GetProcAddress(kernel, "CreatePseudoConsole")));
  const auto close =
      reinterpret_cast<CloseFn>(reinterpret_cast<void*>(::GetProcAddress(kernel, "ClosePseudoConsole")));
  void* console = nullptr;
  if (create == nullptr || close == nullptr ||
      FAILED(create(COORD{120, 30}, in_read, out_write, 0, &console))) {
    why =
        "CreatePseudoConsole: " + (create == nullptr ? std::string("not in kernel32") : last_windows_error());
    return std::nullopt;
  }
  ::CloseHandle(in_read);
  ::CloseHandle(out_write);
  PseudoConsoleRun run;
  std::thread reader([&] {  // the pseudo console blocks when nobody reads what it writes
    char chunk[4096];
    DWORD n = 0;
    while (::ReadFile(out_read, chunk, sizeof chunk, &n, nullptr) && n > 0) run.output.append(chunk, n);
  });
  SIZE_T size = 0;
  ::InitializeProcThreadAttributeList(nullptr, 1, 0, &size);
  std::vector<char> storage(size);
  auto* attrs = reinterpret_cast<LPPROC_THREAD_ATTRIBUTE_LIST>(storage.data());
  ::InitializeProcThreadAttributeList(attrs, 1, 0, &size);
  ::UpdateProcThreadAttribute(attrs, 0, ProcThreadAttributeValue(kPseudoConsoleAttribute, FALSE, TRUE, FALSE),
                              console, sizeof console, nullptr, nullptr);
  STARTUPINFOEXW si{};
  si.StartupInfo.cb = sizeof si;
  si.lpAttributeList = attrs;
  wchar_t self[MAX_PATH];
  ::GetModuleFileNameW(nullptr, self, MAX_PATH);
  std::wstring command =
      L"\"" + std::wstring(self) + L"\" --gtest_filter=ConsoleTextTest.AConsoleGetsUtf16AndKeepsItsCodePage";
  ::SetEnvironmentVariableA(kChildVariable, "1");
  PROCESS_INFORMATION pi{};
  const BOOL ok = ::CreateProcessW(nullptr, command.data(), nullptr, nullptr, FALSE,
                                   EXTENDED_STARTUPINFO_PRESENT, nullptr, nullptr, &si.StartupInfo, &pi);
  ::SetEnvironmentVariableA(kChildVariable, nullptr);
  ::DeleteProcThreadAttributeList(attrs);
  if (ok) {
    ::WaitForSingleObject(pi.hProcess, 60000);
    ::GetExitCodeProcess(pi.hProcess, &run.exit_code);
    ::CloseHandle(pi.hThread);
    ::CloseHandle(pi.hProcess);
  } else {
    why = "CreateProcess: " + last_windows_error();
  }
  close(console);  // ends the output stream: the reader finishes
  ::CloseHandle(in_write);
  reader.join();
  ::CloseHandle(out_read);
  if (!ok) return std::nullopt;
  return run;
}

TEST(ConsoleTextTest, AConsoleGetsUtf16AndKeepsItsCodePage) {
  if (::GetEnvironmentVariableA(kChildVariable, nullptr, 0) > 0 || ::GetConsoleWindow() != nullptr) {
    check_console_text();  // this process has a console: the check runs here
    return;
  }
  std::string why;
  const auto run = run_on_pseudo_console(why);
  if (!run) GTEST_SKIP() << "no pseudo console can be made here: " << why;
  EXPECT_EQ(run->exit_code, 0U) << "the check on the pseudo console failed:\n" << run->output;
  // The terminal got the text as UTF-8, from kvgate's UTF-16 through the console.
  EXPECT_NE(run->output.find("console says: 中文 ✓"), std::string::npos) << run->output;
}

TEST(ConsoleTextTest, AFileGetsTheUtf8Bytes) {
  wchar_t dir[MAX_PATH];
  ASSERT_GT(::GetTempPathW(MAX_PATH, dir), 0u);
  const std::wstring path = std::wstring(dir) + L"kvgate-console-test.txt";
  HANDLE f = ::CreateFileW(path.c_str(), GENERIC_WRITE | GENERIC_READ, 0, nullptr, CREATE_ALWAYS,
                           FILE_ATTRIBUTE_TEMPORARY | FILE_FLAG_DELETE_ON_CLOSE, nullptr);
  ASSERT_NE(f, INVALID_HANDLE_VALUE) << last_windows_error();
  ASSERT_TRUE(write_text(f, kText));
  ::SetFilePointer(f, 0, nullptr, FILE_BEGIN);
  std::string got(256, '\0');
  DWORD n = 0;
  ASSERT_TRUE(::ReadFile(f, got.data(), static_cast<DWORD>(got.size()), &n, nullptr));
  ::CloseHandle(f);
  got.resize(n);
  EXPECT_EQ(got, kText);
}

}  // namespace
}  // namespace kvgate::util
