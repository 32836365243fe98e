// Compute-buffer estimate: the scratch memory the engine reserves for its largest graph
// (`sched_reserve: <dev> compute buffer size`). An estimate, not an exact figure: the
// engine's allocator reuses freed tensors, so the true size depends on graph order.
//
// Model (bytes; T = ubatch tokens, masks = one KQ mask per KV cache of
// cells-per-stream × T elements, F16 with flash attention, F32 without):
//   attention phase  masks + T·4·(3·n_embd + 2·q_rows + n_head_kv·(k+v)) + 20·T
//                    + without flash attention T·cells·n_head·4 (the KQ scores)
//   FFN phase        masks + T·4·(4·n_embd + 3·n_ff)      (MoE: n_ff = used experts × expert size)
//   recurrent phase  masks + T·4·(2·n_embd + 3·conv + 2·inner) + 3 × state copies
//   output phase     4·n_vocab·outputs + 8·T·n_embd       (outputs: mainline caps them at the
//                    slot count; ik and older builds reserve logits for all T tokens);
//                    hybrids add the masks when the logits do not fit in the masks' memory
//   graph = the largest phase.
// Calibrated against the pinned CPU engine over ubatch × context on the synthesized
// architectures (within ±15%: src/engine/compute_e2e_test.cc); the published GPU figures of
// reference/kv_estimation.md §3 agree once their builds' logits-for-every-token are counted.
// With layers offloaded the graph runs on the accelerator; the host keeps the inputs (token
// embeddings and the masks).
#pragma once

#include <cstdint>

#include "plan/memory_model.h"
#include "plan/model_desc.h"

namespace kvgate::plan {

struct ComputeEstimate {
  uint64_t graph = 0;   // the whole graph on one backend
  uint64_t device = 0;  // accelerator buffer (0 on a CPU-only plan)
  uint64_t host = 0;    // host buffer
};

// REQUIRES: `plan` has its resolved settings and caches filled (plan_memory does this).
ComputeEstimate estimate_compute(const ModelDescriptor& model, const MemoryPlan& plan, bool offloaded);

}  // namespace kvgate::plan
