#include "plan/compute_estimate.h"

#include <algorithm>

namespace kvgate::plan {

ComputeEstimate estimate_compute(const ModelDescriptor& m, const MemoryPlan& p, bool offloaded) {
  const uint64_t t = std::max<uint32_t>(1, std::min(p.n_ubatch, p.n_ctx));
  const uint64_t mask_elem = p.flash_attn ? 2 : 4;

  uint64_t masks = 0;
  uint64_t main_cells = 0;
  for (const auto& c : p.caches) {
    masks += uint64_t{c.cells} * t * mask_elem;
    if (c.role == CacheRole::kMain) main_cells = c.cells;
  }

  uint64_t q_rows = 0, kv_rows = 0, n_head = 0, n_ff = 0;
  for (const auto& l : m.layers) {
    if (l.kv) {
      q_rows = std::max<uint64_t>(q_rows, uint64_t{l.n_head} * l.k_len);
      kv_rows = std::max<uint64_t>(kv_rows, uint64_t{l.n_head_kv} * (l.k_len + l.v_len));
      n_head = std::max<uint64_t>(n_head, l.n_head);
    }
    n_ff = std::max<uint64_t>(n_ff, l.n_ff);
  }
  const uint64_t n_embd = m.n_embd;

  uint64_t attn_tok = 4 * (3 * n_embd + 2 * q_rows + kv_rows) + 20;
  if (!p.flash_attn) attn_tok += 4 * n_head * main_cells;

  // MoE: the used experts' hidden rows plus the router logits.
  const uint64_t ffn_width = std::max<uint64_t>(n_ff, uint64_t{m.n_expert_used} * m.n_ff_exp);
  const uint64_t ffn_tok = 4 * (4 * n_embd + 3 * ffn_width + m.n_expert);

  uint64_t rec_tok = 0;
  uint64_t state_copies = 0;
  if (p.recurrent) {
    const uint64_t conv = uint64_t{m.ssm_d_inner} + 2ULL * m.ssm_n_group * m.ssm_d_state;
    rec_tok = 4 * (2 * n_embd + 3 * conv + 2 * uint64_t{m.ssm_d_inner});
    state_copies = 3 * 4 * uint64_t{p.recurrent->rows} * (m.n_embd_r + m.n_embd_s);
  }

  const uint64_t layer_phase = masks + t * std::max({attn_tok, ffn_tok, rec_tok}) + state_copies;
  const uint64_t outputs = p.fork == Fork::kMainline ? std::min<uint64_t>(t, p.n_seq_max) : t;
  uint64_t output_phase = 4 * uint64_t{m.n_vocab} * outputs + 8 * t * n_embd;
  // Hybrid graphs keep recurrent-state copies live above the masks, so the logits can only
  // reuse the masks' memory when it is large enough to hold them (measured on the engine).
  if (p.recurrent && masks < output_phase) output_phase += masks;

  ComputeEstimate e;
  e.graph = std::max(layer_phase, output_phase);
  if (offloaded) {
    e.device = e.graph;
    e.host = 4 * t * n_embd + masks;
  } else {
    e.host = e.graph;
  }
  return e;
}

}  // namespace kvgate::plan
