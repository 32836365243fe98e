// ServerSettings: what kvgate wants from a llama-server, independent of any build's flag
// spelling. The planner computes memory from these settings; the launcher maps them to the
// flags of a concrete build (mainline or ik_llama.cpp) and refuses what the build cannot
// express. Fields left unset mean "do not pass a flag; the build's default applies" —
// except the ones kvgate always passes explicitly (context, slots, GPU layers, KV types).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace kvgate::plan {

enum class Fork { kMainline, kIk };

// "mainline" / "ik"
const char* fork_name(Fork fork);

enum class FlashAttn { kAuto, kOn, kOff };

struct ServerSettings {
  std::string model_path;
  uint32_t ctx = 4096;             // -c: total context (all slots together)
  uint32_t parallel = 1;           // -np: slots
  std::optional<bool> kv_unified;  // mainline -kvu/-no-kvu; unset: mainline's default for -np N (off)
  std::string cache_type_k = "f16";  // -ctk (also ik's q6_0 / q8_KV)
  std::string cache_type_v = "f16";  // -ctv
  uint32_t batch = 2048;           // -b
  uint32_t ubatch = 512;           // -ub
  FlashAttn flash_attn = FlashAttn::kAuto;
  int32_t n_gpu_layers = 0;        // -ngl; -1 = all layers
  bool swa_full = false;           // mainline --swa-full
  std::optional<uint64_t> cache_ram_mib;      // -cram (0 disables the host prompt cache)
  std::optional<uint32_t> cache_reuse;        // mainline --cache-reuse N
  std::optional<double> cache_ram_similarity; // ik -crs
  std::optional<uint32_t> cache_ram_n_min;    // ik -cram-n-min
  std::optional<uint32_t> ctx_checkpoints;    // --ctx-checkpoints
  std::optional<uint32_t> ctx_checkpoint_tolerance;  // ik -ctx-ckpt-t (engine_quirks.h)
  bool context_shift = false;      // kvgate compacts instead; on ik "off" prevents silent truncation
  uint32_t timeout_s = 3600;       // -to (socket time-out; kvgate sizes its own deadlines)
  std::optional<uint32_t> threads; // -t
  std::optional<int32_t> mla;      // ik -mla 0..3
  bool jinja = true;               // --jinja (ik defaults to off; tools need it)
  // --chat-template-file: the model's template made prefix-stable (plan/chat_template.h).
  std::optional<std::string> chat_template_file;
  bool metrics = true;             // --metrics
  std::optional<std::string> api_key;  // --api-key (kvgate gives the engine a random one)
  // A file holding api_key (mode 0600): passed as --api-key-file where the build has it, so
  // the key is not on the engine's command line (/proc/PID/cmdline is world-readable).
  std::optional<std::string> api_key_file;
  std::optional<std::string> alias;    // -a
  // --slot-save-path: where the engine saves and restores slot states (kvgate's KV persistence).
  std::optional<std::string> slot_save_path;
};

}  // namespace kvgate::plan
