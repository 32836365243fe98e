#include "gateway/turn_accounting.h"

#include <fmt/format.h>

namespace kvgate::gateway {

std::optional<EngineBreak> engine_break(const PrefixReuse& r) {
  if (!r.prefix_kept || !r.usage_known || r.previous_tokens <= 64) return std::nullopt;
  if (r.cached_tokens * 10 >= r.previous_tokens * 9) return std::nullopt;
  return EngineBreak{
      .cause = r.engine_restarted ? session::BreakCause::kEngineRestart : session::BreakCause::kSlotEviction,
      .detail = fmt::format("engine reused {} of the previous {} prompt tokens", r.cached_tokens, r.previous_tokens)};
}

void record_usage(RequestRecord& record, const Usage& u) {
  record.prompt_tokens = u.prompt_tokens;
  record.cached_tokens = u.cached_tokens;
  record.prefilled_tokens = u.prefilled_tokens;
  record.completion_tokens = u.completion_tokens;
}

}  // namespace kvgate::gateway
