// Tree: read-only access to the files of a machine (sysfs, procfs, /etc) under a root
// directory, so the device readers run on fixture trees as on the real `/`.
//
// Every read is bounded (kMaxFileBytes) and a missing or unreadable file is nullopt, never
// an error: on a real machine debugfs needs root and many nodes exist only on some boards.
// Paths are relative ("sys/class/thermal"); a leading '/' is ignored.
#pragma once

#include <concepts>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace kvgate::device {

class Tree {
 public:
  static constexpr uint64_t kMaxFileBytes = 1 << 20;

  explicit Tree(std::filesystem::path root) : root_(std::move(root)) {}

  const std::filesystem::path& root() const { return root_; }
  std::filesystem::path path(std::string_view rel) const;
  bool exists(std::string_view rel) const;
  // The whole file (at most kMaxFileBytes).
  std::optional<std::string> text(std::string_view rel) const;
  // The first line, trimmed of whitespace and NUL bytes (device-tree strings end in NUL).
  std::optional<std::string> line(std::string_view rel) const;
  // A decimal integer (the file trimmed); nullopt when absent or not a number.
  std::optional<uint64_t> number(std::string_view rel) const;
  // A signed decimal integer: thermal zones read "-256000" when a sensor is off.
  std::optional<int64_t> signed_number(std::string_view rel) const;
  // Names of the entries of a directory, sorted; empty when it does not exist.
  std::vector<std::string> list(std::string_view rel) const;

 private:
  std::filesystem::path root_;
};

// Whitespace and NUL bytes off both ends.
std::string_view trim(std::string_view s);
// A plain decimal (no sign, no spaces), nullopt on anything else or on overflow.
std::optional<uint64_t> parse_u64(std::string_view s);
// "0-3,6,8-11" → {0,1,2,3,6,8,9,10,11}; nullopt when malformed or over 4096 entries.
std::optional<std::vector<uint32_t>> parse_cpu_list(std::string_view s);
// Splits on `sep`, keeping empty pieces.
std::vector<std::string_view> split(std::string_view s, char sep);
// Not on a temporary string: the pieces would point into it after it is gone.
template <typename S>
  requires std::same_as<std::remove_cvref_t<S>, std::string> && (!std::is_lvalue_reference_v<S>)
std::vector<std::string_view> split(S&& s, char sep) = delete;

}  // namespace kvgate::device
