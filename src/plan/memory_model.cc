#include "plan/memory_model.h"

#include <algorithm>

#include <fmt/format.h>

#include "plan/compute_estimate.h"
#include "plan/kv_type.h"
#include "plan/unified_defaults.h"
#include "util/units.h"

namespace kvgate::plan {
namespace {

uint32_t pad_to(uint32_t n, uint32_t multiple) { return (n + multiple - 1) / multiple * multiple; }

// Where each block lives for a given -ngl (the engine's rule: the last ngl - 1 blocks and
// the output layer go to the accelerator, counted from the end).
struct Placement {
  uint32_t i_gpu_start = 0;
  bool output_on_device = false;
  uint32_t offloaded = 0;
  bool on_device(uint32_t il) const { return il >= i_gpu_start; }
};

Placement place_layers(const ModelDescriptor& m, const ServerSettings& s, const PlanOptions& o) {
  const int64_t total = int64_t{m.n_layer_all} + 1;
  int64_t ngl = s.n_gpu_layers < 0 ? total : s.n_gpu_layers;
  if (!o.has_accelerator) ngl = 0;
  Placement p;
  p.i_gpu_start = static_cast<uint32_t>(std::max<int64_t>(total - ngl, 0));
  p.output_on_device = ngl >= 1;
  p.offloaded = static_cast<uint32_t>(std::min(ngl, total));
  if (ngl == 0) p.i_gpu_start = m.n_layer_all + 1;
  return p;
}

struct Types {
  KvType k;
  KvType v;
};

Status check_head(const KvType& type, uint32_t len, const char* which) {
  if (type.quantized && len % type.block_size != 0) {
    return Error(fmt::format("{} cache type {} with block size {} does not divide the head size {} (the engine "
                             "refuses this; pick f16/bf16/f32 or a type whose block divides {})",
                             which, type.name, type.block_size, len, len));
  }
  return {};
}

// One mainline/ik attention cache over the layers `member` selects.
template <typename Member>
Result<CacheBill> attention_cache(const ModelDescriptor& m, const MemoryPlan& p, const Types& t, CacheRole role,
                                  uint32_t cells, const Placement& place, Member member, bool v_less,
                                  uint64_t v_pad_width) {
  CacheBill c;
  c.role = role;
  c.cells = cells;
  c.streams = p.n_stream;
  c.seqs = p.n_seq_max;
  c.type_k = t.k.name;
  c.type_v = v_less ? "" : t.v.name;
  const uint64_t rows = uint64_t{cells} * p.n_stream;
  for (uint32_t il = 0; il < m.n_layer_all; ++il) {
    const LayerDesc& l = m.layers[il];
    if (!member(l)) continue;
    ++c.layers;
    const uint32_t k_len = role == CacheRole::kIndexer ? m.indexer_k_len : l.k_len;
    const uint32_t n_kv = role == CacheRole::kIndexer ? 1 : l.n_head_kv;
    KV_TRY(check_head(t.k, k_len, "K"));
    uint64_t k_bytes = 0;
    if (p.fork == Fork::kIk) {
      // ik lays K out as one row per head and token (q8_KV carries metadata per row).
      KV_ASSIGN_OR_RETURN(uint64_t head_row, t.k.row_bytes(k_len));
      k_bytes = head_row * n_kv * rows;
    } else {
      KV_ASSIGN_OR_RETURN(uint64_t row, t.k.row_bytes(uint64_t{n_kv} * k_len));
      k_bytes = row * rows;
    }
    uint64_t v_bytes = 0;
    if (!v_less) {
      KV_TRY(check_head(t.v, l.v_len, "V"));
      const uint64_t width = v_pad_width != 0 ? v_pad_width : uint64_t{n_kv} * l.v_len;
      if (p.fork == Fork::kIk) {
        KV_ASSIGN_OR_RETURN(v_bytes, t.v.row_bytes(width * rows));  // one flat row per layer
      } else {
        KV_ASSIGN_OR_RETURN(uint64_t row, t.v.row_bytes(width));
        v_bytes = row * rows;
      }
    }
    c.k_bytes += k_bytes;
    c.v_bytes += v_bytes;
    if (place.on_device(il)) c.device_bytes += k_bytes + v_bytes;
  }
  return c;
}

// ik_llama.cpp's MLA cache (deepseek2 family): layout chosen by -mla and flash attention.
Result<CacheBill> ik_mla_cache(const ModelDescriptor& m, MemoryPlan& p, const ServerSettings& s, const Types& t,
                               const Placement& place) {
  IkMlaBill mla;
  mla.mode = s.mla.value_or(3);
  const bool partial = place.offloaded > 0 && place.offloaded < m.n_layer_all + 1;
  if (partial && mla.mode != 3) {
    p.notes.push_back(fmt::format("ik switches -mla {} to 3 when the model is partially offloaded", mla.mode));
    mla.mode = 3;
  }
  if (mla.mode < 0 || mla.mode > 3) return Error(fmt::format("-mla {} is not one of 0, 1, 2, 3", mla.mode));
  if (mla.mode == 0) {
    // Plain multi-head cache of the decompressed heads.
    ModelDescriptor mha = m;
    for (auto& l : mha.layers) {
      l.n_head_kv = l.n_head;
      l.k_len = m.k_len_mla;
      l.v_len = m.v_len_mla;
    }
    return attention_cache(mha, p, t, CacheRole::kMain, p.n_ctx_seq, place,
                           [](const LayerDesc& l) { return l.kv; }, false, 0);
  }
  const uint32_t ckv = m.kv_lora_rank + m.n_rot;
  const KvType& ckv_type = (mla.mode == 1 || p.flash_attn) ? t.k : t.v;
  const bool with_kvt = mla.mode == 1 && !p.flash_attn;
  CacheBill c;
  c.role = CacheRole::kMain;
  c.cells = p.n_ctx_seq;
  c.seqs = p.n_seq_max;
  c.type_k = ckv_type.name;
  c.type_v = with_kvt ? t.v.name : "";
  for (uint32_t il = 0; il < m.n_layer_all; ++il) {
    if (!m.layers[il].kv) continue;
    ++c.layers;
    KV_ASSIGN_OR_RETURN(uint64_t row, ckv_type.row_bytes(ckv));
    uint64_t k_bytes = row * c.cells;
    uint64_t v_bytes = 0;
    if (with_kvt) {
      KV_ASSIGN_OR_RETURN(v_bytes, t.v.row_bytes(uint64_t{m.kv_lora_rank} * c.cells));
    }
    c.k_bytes += k_bytes;
    c.v_bytes += v_bytes;
    if (place.on_device(il)) c.device_bytes += k_bytes + v_bytes;
  }
  mla.ckv_type = c.type_k;
  mla.ckv_bytes = c.k_bytes;
  mla.kvt_type = c.type_v;
  mla.kvt_bytes = c.v_bytes;
  p.ik_mla = mla;
  p.notes.push_back(fmt::format("ik -mla {}: compressed c^KV rows of {} elements{}", mla.mode, ckv,
                                with_kvt ? " plus a transposed V cache" : ", no V cache"));
  return c;
}

Status resolve_context(const ModelDescriptor& m, const ServerSettings& s, const PlanOptions& o, MemoryPlan& p) {
  p.fork = o.fork;
  p.n_ctx_train = m.n_ctx_train;
  p.n_seq_max = std::max<uint32_t>(1, s.parallel);
  const uint32_t raw_ctx = s.ctx == 0 ? m.n_ctx_train : s.ctx;
  if (raw_ctx == 0) return Error("--ctx 0 means the training context, but the model declares none");
  p.flash_attn = s.flash_attn != FlashAttn::kOff;
  p.n_batch = std::min(raw_ctx, std::max<uint32_t>(1, s.batch));
  p.n_ubatch = std::min(p.n_batch, s.ubatch == 0 ? p.n_batch : s.ubatch);
  const uint32_t pad = (o.fork == Fork::kIk && !p.flash_attn) ? 32 : 256;
  p.n_ctx = pad_to(raw_ctx, pad);
  p.kv_unified = o.fork == Fork::kIk ? true : s.kv_unified.value_or(false);
  if (o.fork == Fork::kMainline && !p.kv_unified) {
    p.n_ctx_seq = pad_to(p.n_ctx / p.n_seq_max, 256);
    p.n_ctx = p.n_ctx_seq * p.n_seq_max;
    p.n_stream = p.n_seq_max;
  } else {
    p.n_ctx_seq = p.n_ctx;
    p.n_stream = 1;
  }
  if (o.fork == Fork::kMainline) {
    p.n_ctx_slot = p.n_ctx_seq;
    if (m.n_ctx_train > 0 && p.n_ctx_slot > m.n_ctx_train) {
      p.n_ctx_slot = m.n_ctx_train;
      p.slot_capped_by_train = true;
      p.notes.push_back(fmt::format("each slot is capped at the training context ({} tokens); the cells beyond it "
                                    "are allocated but unusable",
                                    m.n_ctx_train));
    }
  } else {
    p.n_ctx_slot = p.n_ctx / p.n_seq_max;
  }
  return {};
}

Result<Types> resolve_types(const ModelDescriptor& m, const ServerSettings& s, const MemoryPlan& p) {
  KV_ASSIGN_OR_RETURN(KvType k, parse_kv_type(s.cache_type_k, p.fork));
  KV_ASSIGN_OR_RETURN(KvType v, parse_kv_type(s.cache_type_v, p.fork));
  if (v.quantized && !p.flash_attn) {
    return Error(fmt::format("quantized V cache ({}) requires flash attention; use -fa on (or auto), or an "
                             "unquantized V type",
                             v.name));
  }
  if (p.fork == Fork::kMainline && m.mla && k.name != v.name) {
    return Error(fmt::format("MLA models need the same K and V cache type (got {} and {})", k.name, v.name));
  }
  return Types{std::move(k), std::move(v)};
}

Status plan_caches(const ModelDescriptor& m, const ServerSettings& s, const Types& t, const Placement& place,
                   MemoryPlan& p) {
  const bool ik = p.fork == Fork::kIk;
  // Without flash attention mainline pads every V row to the widest layer's.
  uint64_t v_pad = 0;
  if (!ik && !p.flash_attn && !m.mla) {
    uint64_t widest = 0;
    bool variable = false;
    const uint64_t first = uint64_t{m.layers[0].n_head_kv} * m.layers[0].v_len;
    for (const auto& l : m.layers) {
      const uint64_t w = uint64_t{l.n_head_kv} * l.v_len;
      widest = std::max(widest, w);
      variable = variable || w != first;
    }
    if (variable) {
      v_pad = widest;
      p.notes.push_back(fmt::format("V widths differ across layers and flash attention is off: every V row is "
                                    "padded to {} elements",
                                    widest));
    }
  }

  if (ik && m.kv_lora_rank > 0 && (m.arch == "deepseek2" || m.arch == "deepseek32" || m.arch == "glm-dsa")) {
    KV_ASSIGN_OR_RETURN(CacheBill c, ik_mla_cache(m, p, s, t, place));
    p.caches.push_back(std::move(c));
  } else if (ik) {
    if (m.has_swa()) {
      p.notes.push_back("ik_llama.cpp has no separate sliding-window cache: its SWA layers hold full-context KV");
    }
    KV_ASSIGN_OR_RETURN(CacheBill c, attention_cache(m, p, t, CacheRole::kMain, p.n_ctx_seq, place,
                                                     [](const LayerDesc& l) { return l.kv; }, false, 0));
    p.caches.push_back(std::move(c));
  } else {
    KV_ASSIGN_OR_RETURN(CacheBill base, attention_cache(m, p, t, CacheRole::kMain, p.n_ctx_seq, place,
                                                        [](const LayerDesc& l) { return l.kv && !l.swa; }, m.mla,
                                                        v_pad));
    // With sliding-window layers the engine always creates both caches (the base one may
    // hold no layer).
    const bool swa = m.has_swa();
    p.caches.push_back(std::move(base));
    if (swa) {
      uint32_t cells = p.n_ctx_seq;
      if (!s.swa_full) {
        const uint64_t want = uint64_t{m.n_swa} * (p.kv_unified ? p.n_seq_max : 1) + p.n_ubatch;
        cells = pad_to(static_cast<uint32_t>(std::min<uint64_t>(p.n_ctx_seq, want)), 256);
      }
      KV_ASSIGN_OR_RETURN(CacheBill c, attention_cache(m, p, t, CacheRole::kSwa, cells, place,
                                                       [](const LayerDesc& l) { return l.kv && l.swa; }, m.mla,
                                                       v_pad));
      p.caches.push_back(std::move(c));
    }
  }
  if (m.indexer_k_len > 0 && m.count_indexer_layers() > 0 && !ik) {
    KV_ASSIGN_OR_RETURN(CacheBill c, attention_cache(m, p, t, CacheRole::kIndexer, p.n_ctx_seq, place,
                                                     [](const LayerDesc& l) { return l.indexer; }, m.mla, 0));
    p.caches.push_back(std::move(c));
  }
  return {};
}

void plan_recurrent(const ModelDescriptor& m, const Placement& place, MemoryPlan& p) {
  const uint32_t layers = m.count_recurrent_layers();
  if (layers == 0) return;
  RecurrentBill r;
  r.seqs = p.n_seq_max;
  r.rows = std::max<uint32_t>(1, p.n_seq_max);
  if (p.fork == Fork::kIk) r.rows = std::min(r.rows, p.n_ctx_seq);
  r.layers = layers;
  r.logged_layers = m.n_layer;
  for (uint32_t il = 0; il < m.n_layer_all; ++il) {
    if (!m.layers[il].recurrent) continue;
    const uint64_t rb = uint64_t{r.rows} * m.n_embd_r * 4;
    const uint64_t sb = uint64_t{r.rows} * m.n_embd_s * 4;
    r.r_bytes += rb;
    r.s_bytes += sb;
    if (place.on_device(il)) r.device_bytes += rb + sb;
  }
  p.recurrent = r;
}

void plan_weights(const ModelDescriptor& m, const Placement& place, MemoryPlan& p) {
  p.weights_host += m.token_embd_bytes;
  for (uint32_t il = 0; il < m.n_layer_all; ++il) {
    (place.on_device(il) ? p.weights_device : p.weights_host) += m.layers[il].weight_bytes;
  }
  if (place.output_on_device) {
    p.weights_device += m.output_bytes + (m.tied_output ? m.token_embd_bytes : 0);
  } else {
    p.weights_host += m.output_bytes;
  }
  p.offloaded_layers = place.offloaded;
  p.offloadable_layers = m.n_layer_all + 1;
}

// One context checkpoint of one slot: a sequence's recurrent rows plus the SWA cells it keeps.
uint64_t checkpoint_bytes(const ModelDescriptor& m, const MemoryPlan& p) {
  uint64_t checkpoint = 0;
  if (p.recurrent) checkpoint += p.recurrent->bytes() / p.recurrent->rows;
  if (const CacheBill* swa = p.cache(CacheRole::kSwa)) {
    const uint64_t per_cell = swa->bytes() / (uint64_t{swa->cells} * swa->streams);
    checkpoint += per_cell * std::min<uint64_t>(swa->cells, uint64_t{m.n_swa} + p.n_ubatch);
  }
  return checkpoint;
}

// The unified-memory rule (unified_defaults.h) for the host caches the settings leave unset.
void size_for_unified_memory(const ModelDescriptor& m, const ServerSettings& s, const PlanOptions& o,
                             MemoryPlan& p) {
  if (!o.unified_memory || o.memory_budget == 0 || (s.cache_ram_mib && s.ctx_checkpoints)) return;
  UnifiedInputs in;
  in.free_bytes = static_cast<int64_t>(o.memory_budget) - static_cast<int64_t>(p.total());
  in.checkpoint_bytes = checkpoint_bytes(m, p);
  in.slots = p.n_seq_max;
  in.engine_checkpoints = s.ctx_checkpoints.value_or(32);
  if (p.fork == Fork::kIk) in.ik_entry_bytes = sequence_state_bytes(p, p.n_ctx_slot);
  const UnifiedDefaults d = unified_host_defaults(in);
  HostCacheSizing sized{.free_bytes = in.free_bytes};
  if (!s.cache_ram_mib) sized.cache_ram_mib = d.cache_ram_mib;
  if (!s.ctx_checkpoints && d.ctx_checkpoints) sized.ctx_checkpoints = d.ctx_checkpoints;
  std::string what;
  if (sized.cache_ram_mib) what = fmt::format("host prompt cache {} MiB", *sized.cache_ram_mib);
  if (sized.ctx_checkpoints) {
    what += fmt::format("{}{} context checkpoint(s) per slot", what.empty() ? "" : " and ", *sized.ctx_checkpoints);
  }
  if (!what.empty()) {
    p.notes.push_back(fmt::format(
        "unified memory: {} sized from the {} MiB the budget leaves after weights, KV, compute and reserve "
        "(checkpoints ≤ ¼ of it and ≤ 8 per slot, prompt cache ≤ ¼ of the rest and ≤ 8192 MiB; the remainder stays "
        "free for the rest of the board); --cache-ram / --ctx-checkpoints override",
        what, in.free_bytes > 0 ? util::format_mib(static_cast<uint64_t>(in.free_bytes)) : "0"));
  }
  if (d.ik_cache_off && sized.cache_ram_mib) {
    p.notes.push_back(fmt::format("unified memory on ik: a full slot state ({} MiB) is larger than the prompt-cache "
                                  "share, and ik keeps one entry whatever -cram says, so the prompt cache is off",
                                  util::format_mib(*in.ik_entry_bytes)));
  }
  p.sized = sized;
}

void plan_host_caches(const ModelDescriptor& m, const ServerSettings& s, MemoryPlan& p) {
  const std::optional<uint64_t> cache_ram = p.sized && p.sized->cache_ram_mib ? p.sized->cache_ram_mib : s.cache_ram_mib;
  const std::optional<uint32_t> ctx_checkpoints =
      p.sized && p.sized->ctx_checkpoints ? p.sized->ctx_checkpoints : s.ctx_checkpoints;
  const uint64_t limit = cache_ram.value_or(8192) * util::kMiB;
  p.prompt_cache_host = limit;
  if (limit > 0) {
    const uint64_t one_state = sequence_state_bytes(p, p.n_ctx_slot);
    if (one_state > limit) {
      if (p.fork == Fork::kIk) {
        p.prompt_cache_host = one_state;
        p.notes.push_back(fmt::format("ik keeps one prompt-cache entry even above -cram: a full slot state is {} MiB",
                                      util::format_mib(one_state)));
      } else {
        p.notes.push_back(fmt::format("a full slot state ({} MiB) exceeds --cache-ram ({} MiB): such states are not "
                                      "kept, and a conversation that loses its slot is prefilled again",
                                      util::format_mib(one_state), util::format_mib(limit)));
      }
    }
  }
  // Context checkpoints: models whose cache cannot be truncated (sliding window on mainline,
  // recurrent state) keep up to --ctx-checkpoints copies of one sequence's partial state per slot.
  const uint64_t checkpoint = checkpoint_bytes(m, p);
  if (checkpoint > 0) {
    // At most --ctx-checkpoints per slot, and no closer together than the minimum spacing
    // (mainline --checkpoint-min-step 8192; ik --ctx-checkpoints-interval 512).
    const uint64_t spacing = p.fork == Fork::kIk ? 512 : 8192;
    const uint64_t count = std::min<uint64_t>(ctx_checkpoints.value_or(32), p.n_ctx_slot / spacing + 1);
    p.checkpoints_host = checkpoint * count * p.n_seq_max;
    if (count > 0) {
      p.notes.push_back(fmt::format("context checkpoints: up to {} per slot of {} MiB each (a full slot, worst case)",
                                    count, util::format_mib(checkpoint)));
    }
  }
}

}  // namespace

const char* cache_role_name(CacheRole role) {
  switch (role) {
    case CacheRole::kMain: return "kv";
    case CacheRole::kSwa: return "kv_swa";
    case CacheRole::kIndexer: return "indexer";
  }
  return "kv";
}

uint64_t MemoryPlan::kv_bytes() const {
  uint64_t n = 0;
  for (const auto& c : caches) n += c.bytes();
  return n;
}

uint64_t MemoryPlan::kv_device_bytes() const {
  uint64_t n = 0;
  for (const auto& c : caches) n += c.device_bytes;
  return n;
}

uint64_t MemoryPlan::device_total() const {
  return weights_device + kv_device_bytes() + (recurrent ? recurrent->device_bytes : 0) + compute_device;
}

uint64_t MemoryPlan::host_total() const {
  return weights_host + (kv_bytes() - kv_device_bytes()) + (recurrent ? recurrent->bytes() - recurrent->device_bytes : 0) +
         compute_host + output_host + prompt_cache_host + checkpoints_host;
}

const CacheBill* MemoryPlan::cache(CacheRole role) const {
  for (const auto& c : caches) {
    if (c.role == role) return &c;
  }
  return nullptr;
}

uint64_t sequence_state_bytes(const MemoryPlan& plan, uint32_t tokens) {
  uint64_t bytes = 0;
  for (const auto& c : plan.caches) {
    const uint64_t cells = uint64_t{c.cells} * c.streams;
    if (cells == 0) continue;
    const uint64_t per_cell = c.bytes() / cells;
    bytes += per_cell * std::min<uint64_t>(tokens, c.cells);
  }
  if (plan.recurrent && plan.recurrent->rows > 0) bytes += plan.recurrent->bytes() / plan.recurrent->rows;
  return bytes;
}

uint64_t saved_state_bytes(const MemoryPlan& plan, uint32_t tokens) {
  uint64_t cell_records = 0;  // per cell of each cache: position, number of sequences, the sequence
  for (const auto& c : plan.caches) cell_records += 12 * std::min<uint64_t>(tokens, c.cells);
  // A hybrid model's file carries one more such record per token (measured: qwen35, 1,898
  // tokens, 23,032 bytes beyond the attention cache's records and the recurrent rows).
  if (plan.recurrent && !plan.caches.empty()) cell_records += 12 * uint64_t{tokens};
  return sequence_state_bytes(plan, tokens) + 4 * uint64_t{tokens} + cell_records;
}

ServerSettings with_sized_defaults(const ServerSettings& settings, const MemoryPlan& plan) {
  ServerSettings s = settings;
  if (plan.sized) {
    if (plan.sized->cache_ram_mib && !s.cache_ram_mib) s.cache_ram_mib = plan.sized->cache_ram_mib;
    if (plan.sized->ctx_checkpoints && !s.ctx_checkpoints) s.ctx_checkpoints = plan.sized->ctx_checkpoints;
  }
  return s;
}

Result<MemoryPlan> plan_memory(const ModelDescriptor& m, const ServerSettings& s, const PlanOptions& o) {
  MemoryPlan p;
  KV_TRY(resolve_context(m, s, o, p));
  KV_ASSIGN_OR_RETURN(Types types, resolve_types(m, s, p));
  const Placement place = place_layers(m, s, o);
  KV_TRY(plan_caches(m, s, types, place, p));
  plan_recurrent(m, place, p);
  plan_weights(m, place, p);

  const ComputeEstimate compute = estimate_compute(m, p, place.offloaded > 0);
  p.compute_device = compute.device;
  p.compute_host = compute.host;
  p.output_host = uint64_t{m.n_vocab} * p.n_seq_max * 4;
  p.reserve = o.reserve_bytes;
  p.unified_memory = o.unified_memory;
  size_for_unified_memory(m, s, o, p);
  plan_host_caches(m, s, p);

  p.estimate = !m.known_arch;
  p.notes.insert(p.notes.begin(), m.notes.begin(), m.notes.end());
  return p;
}

}  // namespace kvgate::plan
