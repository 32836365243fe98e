// Formatting shared by the checks and the report (internal to kvgate_device).
#pragma once

#include <cstdint>
#include <string>

namespace kvgate::device {

// 1300500000 → "1300.5 MHz", 3199000000 → "3199 MHz" (at most two decimals).
std::string mhz(uint64_t hz);

}  // namespace kvgate::device
