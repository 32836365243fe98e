#include "gateway/turn_budget.h"

#include <algorithm>

#include "session/stabiliser.h"
#include "util/json.h"

namespace kvgate::gateway {

namespace {

uint64_t fraction_of(uint64_t n, double fraction) {
  return static_cast<uint64_t>(static_cast<double>(n) * fraction);
}

}  // namespace

Watermarks watermarks(uint64_t context, std::optional<uint64_t> high_tokens, double high_fraction,
                      double low_fraction) {
  Watermarks w;
  w.high = high_tokens.value_or(fraction_of(context, high_fraction));
  w.low = fraction_of(w.high, low_fraction);
  return w;
}

uint64_t reply_reserve(std::optional<int64_t> max_tokens, uint64_t default_reserve) {
  return max_tokens && *max_tokens > 0 ? static_cast<uint64_t>(*max_tokens) : default_reserve;
}

uint64_t compaction_target(uint64_t low, uint64_t reserve) { return low > reserve ? low - reserve : low; }

std::optional<uint64_t> extended_prompt_bound(const nlohmann::json& last_view, uint64_t last_tokens,
                                              const nlohmann::json& view) {
  if (last_tokens == 0 || !last_view.is_array() || last_view.empty() || !view.is_array()) return std::nullopt;
  if (session::first_different_message(last_view, view) != last_view.size()) return std::nullopt;
  uint64_t added = 0;
  for (size_t i = last_view.size(); i < view.size(); ++i) added += 16 + util::json_text(view[i]).size();
  return last_tokens + added + 64;
}

bool needs_exact_count(bool count_tokens, std::optional<uint64_t> bound, bool compaction, uint64_t high,
                       uint64_t reserve) {
  return count_tokens && (!bound || (compaction && high > 0 && *bound + reserve > high));
}

uint64_t overflow_target(uint64_t counted, uint64_t engine_prompt_tokens, uint64_t engine_context,
                         double high_fraction, double low_fraction, uint64_t reserve) {
  uint64_t target = std::max(counted, engine_prompt_tokens) * 6 / 10;
  if (engine_context > 0) {
    const uint64_t engine_low =
        static_cast<uint64_t>(static_cast<double>(engine_context) * high_fraction * low_fraction);
    target = std::min(target, compaction_target(engine_low, reserve));
  }
  return target;
}

std::optional<uint64_t> reply_room(uint64_t context, uint64_t prompt, std::optional<int64_t> max_tokens) {
  if (context == 0 || prompt == 0 || prompt + 1 >= context) return std::nullopt;
  const uint64_t room = context - prompt - 1;
  if (max_tokens && *max_tokens > 0 && static_cast<uint64_t>(*max_tokens) <= room) return std::nullopt;
  return room;
}

}  // namespace kvgate::gateway
