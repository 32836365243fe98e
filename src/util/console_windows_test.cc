// util::write_text: a console gets UTF-16 through WriteConsoleW and keeps its code page; a pipe
// or a file gets the UTF-8 bytes unchanged.
// <windows.h> first: the headers after it need its types.
// clang-format off
#include <windows.h>
// clang-format on

#include <string>

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

TEST(ConsoleTextTest, AConsoleGetsUtf16AndKeepsItsCodePage) {
  if (::GetConsoleWindow() == nullptr && !::AllocConsole()) {
    GTEST_SKIP() << "no console can be made here: " << last_windows_error();
  }
  // A console on the GBK code page, as a Chinese Windows starts one.
  ::SetConsoleOutputCP(936);
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
  EXPECT_EQ(::GetConsoleOutputCP(), before) << "the console's code page was changed";
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
