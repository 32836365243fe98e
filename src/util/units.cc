#include "util/units.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <utility>

#include "util/strings.h"

namespace kvgate::util {
namespace {

struct Suffix {
  std::string_view text;
  uint64_t factor;
};

// Splits "1.5GiB" into the number "1.5" and the suffix "GiB" (whitespace between allowed).
std::pair<std::string_view, std::string_view> split_number(std::string_view text) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  std::string_view number = text.substr(0, i);
  std::string_view rest = text.substr(i);
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  return {number, rest};
}

Result<uint64_t> scale(std::string_view original, std::string_view number, uint64_t factor) {
  if (number.empty()) return Error("'" + std::string(original) + "' does not start with a number");
  if (number.find('.') == std::string_view::npos) {
    uint64_t value = 0;
    auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
    if (ec != std::errc() || ptr != number.data() + number.size()) {
      return Error("'" + std::string(original) + "' is not a valid number");
    }
    if (value != 0 && factor > std::numeric_limits<uint64_t>::max() / value) {
      return Error("'" + std::string(original) + "' is too large");
    }
    return value * factor;
  }
  double value = 0;
  auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (ec != std::errc() || ptr != number.data() + number.size() || value < 0) {
    return Error("'" + std::string(original) + "' is not a valid number");
  }
  const double scaled = value * static_cast<double>(factor);
  if (scaled >= 1.8e19) return Error("'" + std::string(original) + "' is too large");
  return static_cast<uint64_t>(std::llround(scaled));
}

}  // namespace

Result<uint64_t> parse_bytes(std::string_view text) {
  static constexpr Suffix kSuffixes[] = {
      {"", kMiB},        {"b", 1},          {"k", kKiB},       {"kib", kKiB},
      {"m", kMiB},       {"mib", kMiB},     {"g", kGiB},       {"gib", kGiB},
      {"t", 1024 * kGiB}, {"tib", 1024 * kGiB}, {"kb", 1000},   {"mb", 1000 * 1000},
      {"gb", 1000 * 1000 * 1000}, {"tb", 1000ULL * 1000 * 1000 * 1000},
  };
  auto [number, suffix] = split_number(text);
  const std::string s = util::ascii_lower(suffix);
  for (const auto& candidate : kSuffixes) {
    if (s == candidate.text) return scale(text, number, candidate.factor);
  }
  return Error("'" + std::string(text) +
               "' is not a memory size (examples: 32GiB, 6144MiB, 512KiB, 2GB; a bare number is MiB)");
}

Result<uint64_t> parse_tokens(std::string_view text) {
  static constexpr Suffix kSuffixes[] = {{"", 1}, {"k", 1024}, {"m", 1024 * 1024}};
  auto [number, suffix] = split_number(text);
  const std::string s = util::ascii_lower(suffix);
  for (const auto& candidate : kSuffixes) {
    if (s == candidate.text) return scale(text, number, candidate.factor);
  }
  return Error("'" + std::string(text) + "' is not a token count (examples: 4096, 32k, 256k, 1M)");
}

double to_mib(uint64_t bytes) { return static_cast<double>(bytes) / static_cast<double>(kMiB); }

std::string format_mib(uint64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f", to_mib(bytes));
  return buf;
}

std::string format_bytes(uint64_t bytes) {
  char buf[64];
  if (bytes < kKiB) {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  } else if (bytes < kMiB) {
    std::snprintf(buf, sizeof buf, "%.2f KiB", static_cast<double>(bytes) / static_cast<double>(kKiB));
  } else if (bytes < kGiB) {
    std::snprintf(buf, sizeof buf, "%.2f MiB", to_mib(bytes));
  } else {
    std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(bytes) / static_cast<double>(kGiB));
  }
  return buf;
}

std::string format_tokens(uint64_t tokens) {
  if (tokens >= 1024 && tokens % (1024 * 1024) == 0) return std::to_string(tokens / (1024 * 1024)) + "M";
  if (tokens >= 1024 && tokens % 1024 == 0) return std::to_string(tokens / 1024) + "k";
  return std::to_string(tokens);
}

}  // namespace kvgate::util
