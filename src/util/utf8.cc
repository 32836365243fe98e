#include "util/utf8.h"

#include <cstdint>

#include <fmt/format.h>

namespace kvgate::util {

size_t utf8_sequence(std::string_view t, size_t p) {
  auto b = [&](size_t i) { return static_cast<unsigned char>(t[p + i]); };
  unsigned char c = b(0);
  if (c < 0x80) return 1;
  size_t n = 0;
  uint32_t cp = 0;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
    cp = c & 0x1Fu;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    cp = c & 0x0Fu;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    cp = c & 0x07u;
  } else {
    return 0;
  }
  if (p + n > t.size()) return 0;
  for (size_t i = 1; i < n; ++i) {
    if ((b(i) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i) & 0x3Fu);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
      (cp >= 0xD800 && cp <= 0xDFFF)) {
    return 0;
  }
  return n;
}

std::u16string to_utf16(std::string_view t) {
  std::u16string out;
  for (size_t i = 0; i < t.size();) {
    const size_t n = utf8_sequence(t, i);
    const auto b = [&](size_t k) { return static_cast<uint32_t>(static_cast<unsigned char>(t[i + k])); };
    uint32_t cp = 0xFFFD;
    if (n == 1) cp = b(0);
    if (n == 2) cp = ((b(0) & 0x1Fu) << 6) | (b(1) & 0x3Fu);
    if (n == 3) cp = ((b(0) & 0x0Fu) << 12) | ((b(1) & 0x3Fu) << 6) | (b(2) & 0x3Fu);
    if (n == 4) cp = ((b(0) & 0x07u) << 18) | ((b(1) & 0x3Fu) << 12) | ((b(2) & 0x3Fu) << 6) | (b(3) & 0x3Fu);
    i += n > 0 ? n : 1;
    if (cp >= 0x10000) {
      out += static_cast<char16_t>(0xD800 + ((cp - 0x10000) >> 10));
      out += static_cast<char16_t>(0xDC00 + ((cp - 0x10000) & 0x3FF));
    } else {
      out += static_cast<char16_t>(cp);
    }
  }
  return out;
}

size_t complete_utf8_prefix(std::string_view text) {
  // Look back at most 3 bytes for the lead byte of a sequence that does not fit.
  for (size_t back = 1; back <= 3 && back <= text.size(); ++back) {
    const auto c = static_cast<unsigned char>(text[text.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return need > back ? text.size() - back : text.size();
  }
  return text.size();
}

bool is_valid_utf8(std::string_view text) {
  for (size_t p = 0; p < text.size();) {
    size_t n = utf8_sequence(text, p);
    if (n == 0) return false;
    p += n;
  }
  return true;
}

std::string sanitize_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t p = 0; p < text.size();) {
    size_t n = utf8_sequence(text, p);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++p;
    } else {
      out.append(text.substr(p, n));
      p += n;
    }
  }
  return out;
}

std::optional<std::string> client_id_problem(std::string_view id, size_t max_bytes) {
  if (id.size() > max_bytes) return fmt::format("is longer than {} bytes", max_bytes);
  for (size_t p = 0; p < id.size();) {
    const size_t n = utf8_sequence(id, p);
    if (n == 0) {
      return fmt::format("is not valid UTF-8 (byte 0x{:02x} at offset {})", static_cast<unsigned char>(id[p]),
                         p);
    }
    const unsigned c0 = static_cast<unsigned char>(id[p]);
    const unsigned c1 = n == 2 ? static_cast<unsigned char>(id[p + 1]) : 0u;
    // C0 controls and DEL are single bytes; the C1 controls U+0080-U+009F are C2 80-C2 9F.
    const bool control = (n == 1 && (c0 < 0x20 || c0 == 0x7f)) || (c0 == 0xC2 && c1 >= 0x80 && c1 <= 0x9F);
    if (control) {
      const unsigned cp = n == 1 ? c0 : c1;
      return fmt::format("holds a control character (U+{:04X} at offset {})", cp, p);
    }
    p += n;
  }
  return std::nullopt;
}

}  // namespace kvgate::util
