// Identifiers kvgate makes up for what it answers (messages, responses): a prefix and 24
// random hexadecimal digits (96 bits), unique in practice and not guessable from another.
#pragma once

#include <cstdint>
#include <mutex>
#include <random>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace kvgate::util {

inline std::string random_id(std::string_view prefix) {
  static std::mutex mu;
  static std::mt19937_64 rng(std::random_device{}());
  std::lock_guard lock(mu);
  const uint64_t a = rng(), b = rng();
  return fmt::format("{}{:016x}{:08x}", prefix, a, static_cast<uint32_t>(b));
}

}  // namespace kvgate::util
