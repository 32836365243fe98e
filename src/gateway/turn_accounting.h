// What a turn's figures say after the engine answered, pure.
//
// A prompt that extends the previous turn's (kvgate and the client changed nothing before its
// end) should be served from the engine's cache. When the engine reused less than 90 % of the
// previous prompt anyway, the engine lost it: it restarted (another engine generation), or the
// slot was given to other work (evicted). Prompts of 64 tokens or fewer are not judged.
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "metrics/metrics.h"
#include "session/stabiliser.h"
#include "upstream/reply.h"

namespace kvgate::gateway {

struct PrefixReuse {
  bool prefix_kept = false;       // the view extends the previous turn's view
  bool usage_known = false;       // the engine reported its figures
  uint64_t cached_tokens = 0;     // of this prompt, reused from the engine's cache
  uint64_t previous_tokens = 0;   // the previous turn's prompt, as the engine counted it
  bool engine_restarted = false;  // another engine served the previous turn
};

struct EngineBreak {
  session::BreakCause cause = session::BreakCause::kSlotEviction;
  std::string detail;
};

// The cause of a prefix break the engine made, if it made one.
std::optional<EngineBreak> engine_break(const PrefixReuse& reuse);

// The engine's figures of an answer into the request's record.
void record_usage(RequestRecord& record, const Usage& usage);

}  // namespace kvgate::gateway
