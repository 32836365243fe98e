// Small string helpers shared across libraries.
#pragma once

#include <cstddef>
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

// The value of one hexadecimal digit, -1 for any other character.
constexpr int hex_digit_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace kvgate::util
