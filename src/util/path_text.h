// A path as UTF-8 text, for the libraries that take file names as UTF-8 on every platform
// (SQLite) and for messages: path.string() is the system's narrow encoding, which on Windows
// is the ANSI code page, not UTF-8.
#pragma once

#include <filesystem>
#include <string>

namespace kvgate::util {

inline std::string path_utf8(const std::filesystem::path& p) {
#ifdef _WIN32
  const std::u8string u = p.u8string();
  return std::string(u.begin(), u.end());
#else
  return p.string();
#endif
}

}  // namespace kvgate::util
