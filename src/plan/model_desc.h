// ModelDescriptor: what a GGUF model declares that decides its memory bill, layer by layer.
//
// describe_model() reads only the header (works on metadata-only files) and applies the
// engine's own rules for the architecture: which layers hold attention KV in the main
// context, which use the sliding-window (SWA) cache, which hold recurrent state (and how
// big one sequence's state is), which carry a DSA indexer key cache, which hold nothing
// (MTP/nextn blocks the engine filters out, layers that reuse another layer's KV, MLP-only
// blocks). Per-layer `head_count_kv` arrays, `key_length`/`value_length` and their `_swa`
// and `_mla` variants are honoured. Weights are summed per block from the tensor infos so
// the planner can place them by `-ngl`.
//
// Architectures kvgate has no rules for fall back to the dense rule (every block holds
// full-context KV from the generic keys); `known_arch` is then false and `notes` says so,
// and every figure derived from the descriptor is an estimate.
//
// Weights: by default each tensor counts the bytes the file declares. With a weight recipe
// (DescribeOptions::weights, plan/quant_recipe.h) every tensor is re-typed as llama.cpp's
// quantizer would for that recipe, so a model can be planned at a quant other than the file's
// (or from a metadata-only header); `weights_recipe` then names it and every weight figure is
// for that recipe.
//
// Errors: missing `general.architecture` or `<arch>.block_count`, per-layer arrays whose
// length differs from block_count (the engine refuses those too).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/file.h"
#include "plan/quant_recipe.h"
#include "util/result.h"

namespace kvgate::plan {

struct LayerDesc {
  bool kv = false;         // holds K (and V) cells in the main context
  bool swa = false;        // its KV lives in the sliding-window cache (mainline iSWA)
  bool recurrent = false;  // holds recurrent state rows (conv/shift + SSM state)
  bool indexer = false;    // holds a DSA lightning-indexer key cache
  bool nextn = false;      // an MTP/nextn block appended after the trunk
  uint32_t n_head = 0;
  uint32_t n_head_kv = 0;
  uint32_t k_len = 0;      // key length per KV head (the _swa value on SWA layers)
  uint32_t v_len = 0;      // value length per KV head
  uint32_t n_ff = 0;
  uint64_t weight_bytes = 0;  // tensors named blk.<il>.*
};

struct ModelDescriptor {
  std::string arch;
  std::string name;              // general.name
  bool known_arch = false;       // kvgate has rules for this architecture
  std::vector<std::string> notes;  // rules applied, assumptions, fallbacks

  uint32_t n_layer_all = 0;      // block_count (trunk + nextn blocks)
  uint32_t n_layer = 0;          // trunk blocks (block_count - nextn_predict_layers)
  uint32_t n_embd = 0;
  uint32_t n_vocab = 0;
  uint32_t n_ctx_train = 0;
  uint32_t n_expert = 0;
  uint32_t n_expert_used = 0;
  uint32_t n_ff_exp = 0;

  // Sliding window: 0 = none.
  uint32_t n_swa = 0;
  bool swa_chunked = false;

  // MLA (deepseek2 family). `mla` means the GGUF carries key_length_mla/value_length_mla,
  // so mainline stores only the compressed K (V-less cache).
  bool mla = false;
  uint32_t kv_lora_rank = 0;
  uint32_t n_rot = 0;
  uint32_t k_len_mla = 0;        // per-head key/value lengths of the decompressed heads
  uint32_t v_len_mla = 0;

  uint32_t indexer_k_len = 0;    // DSA indexer key length (0 = no indexer)

  // Recurrent state of one sequence in one recurrent layer, in F32 elements.
  uint64_t n_embd_r = 0;         // conv / token-shift state
  uint64_t n_embd_s = 0;         // SSM / WKV state
  // Raw SSM dimensions (for the compute estimate).
  uint32_t ssm_d_conv = 0, ssm_d_inner = 0, ssm_d_state = 0, ssm_n_group = 0, ssm_dt_rank = 0;

  std::vector<LayerDesc> layers;  // n_layer_all entries

  uint64_t token_embd_bytes = 0;  // token_embd.weight (stays on the host)
  uint64_t output_bytes = 0;      // output.weight, output_norm.* and other non-block tensors
  bool tied_output = false;       // no output.weight: the engine reuses token_embd
  uint64_t tensor_bytes = 0;      // all tensors
  bool metadata_only = false;

  // Weight bytes by tensor type (largest first), as the file has them or as the recipe lays them out.
  struct TypeTotal {
    std::string type;
    uint32_t tensors = 0;
    uint64_t bytes = 0;
  };
  std::vector<TypeTotal> weight_types;
  std::string weights_recipe;     // "" = the file's own types, else the recipe ("Q3_K_M")
  bool weights_imatrix = true;    // the recipe assumed an importance matrix
  uint32_t weights_fallbacks = 0; // tensors whose row length forced another type

  uint32_t count_kv_layers(bool swa) const;
  uint32_t count_recurrent_layers() const;
  uint32_t count_indexer_layers() const;
  bool has_recurrent() const { return count_recurrent_layers() > 0; }
  bool has_swa() const { return count_kv_layers(true) > 0; }
};

struct DescribeOptions {
  const QuantRecipe* weights = nullptr;  // re-type every tensor for this recipe
  RecipeOptions recipe;
};

Result<ModelDescriptor> describe_model(const gguf::File& file, const DescribeOptions& options = {});

}  // namespace kvgate::plan
