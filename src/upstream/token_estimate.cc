#include "upstream/token_estimate.h"

#include <algorithm>
#include <cmath>

#include "util/json.h"

namespace kvgate::gateway {

using nlohmann::json;

uint64_t TokenEstimate::units(const json& body, const json& messages) {
  uint64_t n = kPromptUnits;
  if (messages.is_array()) n += util::json_text(messages).size() + kMessageUnits * messages.size();
  if (auto tools = body.find("tools"); tools != body.end() && !tools->is_null())
    n += util::json_text(*tools).size();
  return n;
}

void TokenEstimate::learn(uint64_t units, uint64_t engine_tokens) {
  if (units == 0 || engine_tokens == 0) return;
  std::lock_guard lock(mu_);
  rates_.push_back(static_cast<double>(engine_tokens) / static_cast<double>(units));
  if (rates_.size() > kWindow) rates_.pop_front();
}

std::optional<double> TokenEstimate::rate() const {
  std::lock_guard lock(mu_);
  if (rates_.empty()) return std::nullopt;
  return *std::max_element(rates_.begin(), rates_.end());
}

std::optional<uint64_t> TokenEstimate::estimate(uint64_t units) const {
  const auto r = rate();
  if (!r) return std::nullopt;
  return static_cast<uint64_t>(std::ceil(static_cast<double>(units) * *r * kMargin));
}

}  // namespace kvgate::gateway
