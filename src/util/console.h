// Text kvgate writes to its standard output and error, and the arguments it reads, as UTF-8 on
// every platform.
//
// Windows (console_windows.cc): stdout and stderr are switched to binary mode, so a file or a
// pipe gets the same bytes as on Linux (no CR before LF); where one of them is a console, a
// pump thread takes the UTF-8 kvgate writes and hands it to WriteConsoleW as UTF-16, so the
// text is readable whatever the console's code page, which kvgate never changes (a `chcp
// 65001` in a .bat, or a program that calls SetConsoleOutputCP, changes it for everything
// after it in that console). Engines are started without a console (util::Subprocess), so
// they cannot change it either. The arguments are read from the UTF-16 command line.
// POSIX (console_posix.cc): nothing to do; the arguments are argv.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kvgate::util {

// Call first in main(), before any thread exists. Returns the arguments as UTF-8.
std::vector<std::string> init_console(int argc, char** argv);

#ifdef _WIN32
// Writes UTF-8 `text` to `handle`: UTF-16 through WriteConsoleW when it is a console, the
// bytes unchanged through WriteFile otherwise. A sequence cut at the end of `text` is written
// as U+FFFD: callers that write a stream in chunks split it with complete_utf8_prefix (utf8.h).
bool write_text(void* handle, std::string_view text);
#endif

}  // namespace kvgate::util
