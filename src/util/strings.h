// Small string helpers shared across libraries.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kvgate::util {

// The largest n' <= n that does not split a UTF-8 sequence of `s` (n' = s.size() when n is
// past the end): s.substr(0, n') never ends inside a multi-byte character.
inline size_t utf8_floor(std::string_view s, size_t n) {
  if (n >= s.size()) return s.size();
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return n;
}

// The smallest n' >= n at a UTF-8 character boundary of `s` (at most s.size()).
inline size_t utf8_ceil(std::string_view s, size_t n) {
  while (n < s.size() && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) ++n;
  return n < s.size() ? n : s.size();
}

// The decimal number that starts right after the first `marker` in `text`; 0 when there is
// none. Digits past what a uint64_t holds are not read.
inline uint64_t number_after(std::string_view text, std::string_view marker) {
  const size_t at = text.find(marker);
  if (at == std::string_view::npos) return 0;
  uint64_t n = 0;
  for (size_t i = at + marker.size();
       i < text.size() && text[i] >= '0' && text[i] <= '9' && n < UINT64_MAX / 10; ++i) {
    n = n * 10 + static_cast<uint64_t>(text[i] - '0');
  }
  return n;
}

// `s` with the ASCII letters lower-cased (header values, host names, media types).
inline std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  return out;
}

// `s` without the spaces and tabs around it (HTTP's optional whitespace).
inline std::string_view trim_blanks(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The value of one hexadecimal digit, -1 for any other character.
constexpr int hex_digit_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace kvgate::util
