#include "plan/engine_quirks.h"

#include <algorithm>

#include <fmt/format.h>

namespace kvgate::plan {
namespace {

constexpr std::string_view kIkCpuFaK[] = {"f16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q6_0", "q8_KV"};
constexpr std::string_view kIkCpuFaV[] = {"f16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q6_0"};
constexpr std::string_view kIkCpuNoFaV[] = {"f16", "bf16"};

template <size_t N>
bool in(const std::string_view (&list)[N], std::string_view t) {
  return std::find(std::begin(list), std::end(list), t) != std::end(list);
}

template <size_t N>
std::string join(const std::string_view (&list)[N]) {
  std::string out;
  for (auto t : list) out += (out.empty() ? "" : ", ") + std::string(t);
  return out;
}

}  // namespace

Status check_cache_pair(const ServerCaps& caps, std::string_view k, std::string_view v, FlashAttn fa) {
  if (caps.fork != Fork::kIk || caps.gpu_offload) return {};
  const bool flash = fa != FlashAttn::kOff;  // ik's auto is on
  if (flash && (!in(kIkCpuFaK, k) || !in(kIkCpuFaV, v))) {
    return Error(fmt::format(
        "K cache {} with V cache {} under flash attention cannot run on the CPU backend of {} (it aborts at "
        "load); with flash attention it runs K in {{{}}} with V in {{{}}}; without (--flash-attn off) V {} — "
        "e.g. --ctk f16 or --ctk q8_0",
        k, v, caps.describe(), join(kIkCpuFaK), join(kIkCpuFaV), join(kIkCpuNoFaV)));
  }
  if (!flash && !in(kIkCpuNoFaV, v)) {
    return Error(fmt::format(
        "V cache {} without flash attention cannot run on {} (it stops at load: \"V cache quantization "
        "requires flash_attn\"); without flash attention V must be one of {{{}}}; or turn flash attention on",
        v, caps.describe(), join(kIkCpuNoFaV)));
  }
  return {};
}

bool says_stop_at_max_tokens(Fork fork) { return fork == Fork::kIk; }

bool fails_when_reply_fills_context(Fork fork) { return fork == Fork::kIk; }

bool slot_states_reliable(Fork fork) { return fork != Fork::kIk; }

void choose_fork_settings(const ServerCaps& caps, bool recurrent, ServerSettings& settings) {
  if (recurrent && caps.fork == Fork::kIk && !settings.ctx_checkpoint_tolerance &&
      caps.accepts("-ctx-ckpt-t 8")) {
    settings.ctx_checkpoint_tolerance = kCheckpointTolerance;
  }
}

}  // namespace kvgate::plan
