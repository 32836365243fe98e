// Text of Windows error codes, and the UTF-8 ↔ UTF-16 conversions the Windows sides of
// src/util need (Windows only).
#pragma once

#include <string>
#include <string_view>

namespace kvgate::util {

// The system's message for `code` (GetLastError()), in UTF-8, without the trailing newline.
std::string windows_error_text(unsigned long code);
// The message for GetLastError() now.
std::string last_windows_error();

// UTF-8 → UTF-16 for the W functions; invalid UTF-8 becomes U+FFFD.
std::wstring widen(std::string_view utf8);
// UTF-16 → UTF-8; an unpaired surrogate becomes U+FFFD.
std::string narrow(std::wstring_view utf16);

}  // namespace kvgate::util
