// Whether a llama.cpp-family server kvgate did not start moves cached chunks after a deletion
// (mainline's --cache-reuse N): its /props does not say, and the answer decides where a
// compaction puts its summary (session/compactor.h's summary_after_tail). The probe asks it:
// a prompt S+A+B on slot 0, then S+B. A server that shifts finds B in its cache and computes
// a few tokens of the second prompt; one that does not computes all of B again. S begins with
// a random nonce, so no cached prompt of an earlier probe can answer for this one. Costs about
// 400 tokens of prefill, once, at start, and replaces what slot 0 held.
#pragma once

#include <optional>
#include <string>

#include <httplib.h>

namespace kvgate::cli {

struct ShiftProbe {
  std::optional<bool> shifts;  // unset: the server did not let it tell (the reason in `why`)
  int second_prompt_tokens = 0;
  int second_computed = 0;  // of those, what the server computed (its timings.prompt_n)
  std::string why;
};

// B is kShiftProbeChunk tokens: a server whose reuse threshold (--cache-reuse N) is above it
// is reported as not shifting, which is what it does for any deletion shorter than N.
inline constexpr int kShiftProbeChunk = 320;

ShiftProbe probe_shifting(httplib::Client& server);

}  // namespace kvgate::cli
