#include "plan/capacity.h"

#include <cmath>

namespace kvgate::plan {

std::vector<TextCapacity> text_capacity(uint64_t tokens) {
  struct Density {
    std::string_view kind;
    std::string_view description;
    double low;
    double high;
  };
  static constexpr Density kDensities[] = {
      {"english_prose", "English prose", 4.0, 4.0},
      {"chinese_prose", "Chinese prose (中文连续文本)", 0.595, 0.595},
      {"chinese_lists", "Chinese numbered lists (中文编号条目)", 0.654, 0.747},
  };
  std::vector<TextCapacity> out;
  for (const auto& d : kDensities) {
    const auto t = static_cast<double>(tokens);
    out.push_back({d.kind, d.description, d.low, d.high, static_cast<uint64_t>(std::floor(t * d.low)),
                   static_cast<uint64_t>(std::floor(t * d.high))});
  }
  return out;
}

}  // namespace kvgate::plan
