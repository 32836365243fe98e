// Engine quirks: what one build does differently from the other fork, in one place. The
// flag spelling lives in launch_args (from the probes); everything else kvgate does
// differently for mainline llama.cpp and ik_llama.cpp is decided here, from the build's
// ServerCaps, and measured against the real builds (tests/fixtures/*/, the e2e suites):
//   - offload:        whether -ngl can move anything (ServerCaps::gpu_offload, probed);
//   - cache types:    the K/V pairs the build's backend can run. ik's CPU backend runs flash
//                     attention for K in {f16, q8_0, q4_0, q4_1, iq4_nl, q6_0, q8_KV} with V in
//                     {f16, q8_0, q4_0, q4_1, iq4_nl, q6_0}, and without flash attention only
//                     V in {f16, bf16}; anything else aborts the engine at load ("K cache X
//                     coupled with V cache Y is not a supported combination on the CPU
//                     backend", a GGML_ASSERT for V q8_KV, "V cache quantization requires
//                     flash_attn" for V f32). Measured on ik 8337e4cd3 (x86-64, AVX2) with every
//                     pair; ik's default flash attention ("auto") is on. GPU builds and
//                     mainline: every type the parser accepts;
//   - checkpoints:    ik restores a hybrid/recurrent model from a checkpoint it takes
//                     `-ctx-ckpt-t` tokens before the end of each prompt (default 5); a chat
//                     turn's generation prompt can end in more tokens than the next turn
//                     keeps (qwen3 with thinking off: 6), so kvgate asks for more;
//   - finish reason:  ik answers "stop" when max_tokens ended the reply (mainline "length");
//   - a full context: a reply that fills the context fails on ik (500 "context shift is
//                     disabled", after the whole generation) where mainline ends it "length";
//   - hints:          which fix a message may suggest (mainline has -fit, ik does not).
#pragma once

#include <cstdint>
#include <string_view>

#include "plan/server_caps.h"
#include "plan/server_settings.h"
#include "util/result.h"

namespace kvgate::plan {

// ik's own default for -ctx-ckpt-t, and the value kvgate passes for models that resume from
// checkpoints (recurrent or hybrid): room for any template's generation-prompt tail (a
// thinking block, a role header), at the cost of recomputing at most this many tokens a turn.
inline constexpr uint32_t kIkDefaultCheckpointTolerance = 5;
inline constexpr uint32_t kCheckpointTolerance = 16;

// Error (naming the pair, the build and the pairs that work) if the build's backend cannot
// run K type `k` with V type `v` under `fa`; ok where nothing is known against the pair.
Status check_cache_pair(const ServerCaps& caps, std::string_view k, std::string_view v, FlashAttn fa);

// Whether the build says "stop" for a reply that max_tokens cut short (ik) instead of "length".
bool says_stop_at_max_tokens(Fork fork);
// Whether a reply that fills the context fails as a whole (ik: 500 "context shift is
// disabled", the generated text lost) instead of ending with "length" (mainline).
bool fails_when_reply_fills_context(Fork fork);
// Whether the build's slot save/restore (`POST /slots/N?action=save|restore`) can be relied
// on. ik_llama.cpp 8337e4cd3 does them, but now and then their answer never comes, and a
// later chat request then waits forever too (two conversations alternating on one slot,
// saved and restored around each turn: the 23rd action unanswered, two more later, then a chat
// request hung): kvgate keeps no conversation state on disk for ik builds.
bool slot_states_reliable(Fork fork);

// The settings kvgate chooses for a build where the user left them unset: today the
// checkpoint tolerance of ik for models that resume from checkpoints (`recurrent`).
void choose_fork_settings(const ServerCaps& caps, bool recurrent, ServerSettings& settings);

}  // namespace kvgate::plan
