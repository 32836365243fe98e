// The memory bill of one llama-server process: pure functions of a ModelDescriptor, the
// ServerSettings kvgate will launch with, and the fork (mainline or ik_llama.cpp).
//
// Exact (byte for byte what the engine logs, for the architectures kvgate has rules for):
//   - context and cells: -c padded to 256 (ik: 256 with flash attention, 32 without);
//     mainline non-unified (-np N, no -kvu) splits it into N streams of
//     pad(n_ctx / N, 256) cells; unified and ik use one pool;
//   - KV per cache: cells × streams × rows of (n_head_kv × key/value length) in the K and V
//     types, summed over the layers that hold KV; mainline keeps sliding-window layers in a
//     second cache of pad(min(cells, window × (unified ? N : 1) + ubatch), 256) cells
//     (--swa-full: full size); ik has no separate SWA cache; MLA stores only the compressed
//     K (mainline) or follows ik's -mla mode; DSA models add an indexer key cache;
//   - recurrent state: max(1, N) rows × (conv + SSM state) F32 per recurrent layer (ik:
//     min(max(1, N), cells) rows);
//   - output buffer: n_vocab × max(N, outputs) × 4 bytes on the host;
//   - weights by device: blocks at or above n_layer_all + 1 - ngl on the accelerator, the
//     output layer when ngl ≥ 1 (a tied output is a second copy of token_embd there), the
//     token embedding always on the host.
// Estimates (marked so): compute buffers (plan/compute_estimate.h), the host prompt cache
// (--cache-ram is a limit, the bill uses the limit), context checkpoints, the reserve, and
// everything for architectures without rules.
//
// plan_memory() returns an Error for settings the engine itself refuses (quantized V cache
// with flash attention off, K ≠ V types on MLA, a quantized type whose block does not
// divide the head size, a type the fork does not accept).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "plan/model_desc.h"
#include "plan/server_settings.h"
#include "util/result.h"

namespace kvgate::plan {

struct PlanOptions {
  Fork fork = Fork::kMainline;
  uint64_t reserve_bytes = 1024ULL << 20;  // OS, driver, allocator slack (default 1 GiB)
  bool has_accelerator = true;             // -ngl puts layers on a GPU (false: CPU-only build)
  // The budget is one pool shared by GPU and host (a Jetson; device::Facts::unified_memory).
  // With memory_budget set, the host prompt cache and checkpoints that the settings leave
  // unset are sized from what the rest leaves (plan/unified_defaults.h).
  bool unified_memory = false;
  uint64_t memory_budget = 0;              // bytes; 0 = unknown (engine defaults)
};

// How the unified-memory rule sized the host caches (MemoryPlan::sized).
struct HostCacheSizing {
  int64_t free_bytes = 0;                   // budget minus everything but the host caches
  std::optional<uint64_t> cache_ram_mib;    // set when the rule chose --cache-ram
  std::optional<uint32_t> ctx_checkpoints;  // set when the rule chose --ctx-checkpoints
};

enum class CacheRole { kMain, kSwa, kIndexer };
// "kv", "kv_swa", "indexer"
const char* cache_role_name(CacheRole role);

// One KV cache as the engine logs it (`llama_kv_cache: size = ...`).
struct CacheBill {
  CacheRole role = CacheRole::kMain;
  uint32_t cells = 0;    // per stream (the log's "cells")
  uint32_t streams = 1;  // 1 = unified
  uint32_t seqs = 1;     // n_seq_max
  uint32_t layers = 0;
  std::string type_k;
  std::string type_v;    // empty when the cache stores no V (MLA)
  uint64_t k_bytes = 0;
  uint64_t v_bytes = 0;
  uint64_t device_bytes = 0;  // part on offloaded layers
  uint64_t bytes() const { return k_bytes + v_bytes; }
};

// Recurrent state (`llama_memory_recurrent: size = ...`).
struct RecurrentBill {
  uint32_t rows = 0;           // the log's "cells": max(1, n_seq_max)
  uint32_t seqs = 0;
  uint32_t layers = 0;         // recurrent layers
  uint32_t logged_layers = 0;  // what the log prints: all trunk layers
  uint64_t r_bytes = 0;
  uint64_t s_bytes = 0;
  uint64_t device_bytes = 0;
  uint64_t bytes() const { return r_bytes + s_bytes; }
};

// ik_llama.cpp's MLA cache layout (-mla 0..3).
struct IkMlaBill {
  int32_t mode = 3;
  std::string ckv_type;      // type of the compressed c^KV rows
  uint64_t ckv_bytes = 0;
  std::string kvt_type;      // transposed V (mode 1 without flash attention), else empty
  uint64_t kvt_bytes = 0;
};

struct MemoryPlan {
  Fork fork = Fork::kMainline;
  // Resolved settings.
  uint32_t n_ctx = 0;        // after padding (all streams)
  uint32_t n_ctx_seq = 0;    // per stream
  uint32_t n_ctx_slot = 0;   // per slot as the server uses it (capped at n_ctx_train on mainline)
  bool slot_capped_by_train = false;
  uint32_t n_seq_max = 1;
  uint32_t n_stream = 1;
  bool kv_unified = false;
  bool flash_attn = true;
  uint32_t n_batch = 0;
  uint32_t n_ubatch = 0;
  uint32_t n_ctx_train = 0;
  uint32_t offloaded_layers = 0;    // "offloaded N/M layers": N
  uint32_t offloadable_layers = 0;  // M = n_layer_all + 1

  std::vector<CacheBill> caches;
  std::optional<RecurrentBill> recurrent;
  std::optional<IkMlaBill> ik_mla;

  // Component bytes. "device" is the accelerator (GPU / unified-memory GPU allocations),
  // "host" is system RAM. On a unified-memory board both come out of the same pool.
  uint64_t weights_device = 0;
  uint64_t weights_host = 0;
  uint64_t compute_device = 0;   // estimate
  uint64_t compute_host = 0;     // estimate
  uint64_t output_host = 0;
  uint64_t prompt_cache_host = 0;  // --cache-ram limit
  uint64_t checkpoints_host = 0;   // estimate
  uint64_t reserve = 0;

  bool unified_memory = false;
  std::optional<HostCacheSizing> sized;  // the unified-memory rule applied

  bool estimate = false;           // anything beyond compute/cache-ram/checkpoints is estimated
  std::vector<std::string> notes;  // rules applied and assumptions, for the user

  uint64_t kv_bytes() const;
  uint64_t kv_device_bytes() const;
  uint64_t recurrent_bytes() const { return recurrent ? recurrent->bytes() : 0; }
  uint64_t device_total() const;
  uint64_t host_total() const;
  uint64_t total() const { return device_total() + host_total() + reserve; }
  const CacheBill* cache(CacheRole role) const;
};

Result<MemoryPlan> plan_memory(const ModelDescriptor& model, const ServerSettings& settings,
                               const PlanOptions& options);

// The settings with the host-cache values the plan chose for unset options filled in (so the
// launched server gets exactly what was planned); unchanged when the plan chose nothing.
ServerSettings with_sized_defaults(const ServerSettings& settings, const MemoryPlan& plan);

// Bytes one checkpoint or host-cache entry of a single sequence would take: the whole state
// of one sequence at `tokens` tokens (KV rows for those tokens plus its recurrent rows).
uint64_t sequence_state_bytes(const MemoryPlan& plan, uint32_t tokens);
// Bytes of the file the engine writes when it saves one slot holding `tokens` tokens
// (`/slots/N?action=save`, kvgate's saved conversation state): the sequence state above, the
// token ids, and per cell its position and sequence.
uint64_t saved_state_bytes(const MemoryPlan& plan, uint32_t tokens);

}  // namespace kvgate::plan
