// Parsing and printing of the sizes kvgate's commands accept.
//
// Memory sizes: "32GiB", "6144MiB", "1.5GiB", "512KiB", "8G" (binary), "2GB"/"500MB"
// (decimal), "1048576B"; a bare number is MiB (as in llama-server's MiB-valued flags).
// Token counts: "4096", "4k", "256k" (k = 1024), "1M" (= 1048576).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "util/result.h"

namespace kvgate::util {

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;
constexpr uint64_t kGiB = 1024 * kMiB;

Result<uint64_t> parse_bytes(std::string_view text);
Result<uint64_t> parse_tokens(std::string_view text);

// "6912.00" — bytes as MiB with two decimals, the way llama.cpp logs them.
std::string format_mib(uint64_t bytes);
double to_mib(uint64_t bytes);
// Human-readable: "812 B", "3.20 KiB", "17.53 MiB", "21.40 GiB".
std::string format_bytes(uint64_t bytes);
// "131072" -> "128k" when exact, else the plain number.
std::string format_tokens(uint64_t tokens);

}  // namespace kvgate::util
