// Weight recipes: the tensor types llama.cpp's quantizer (llama-quantize, src/llama-quant.cpp
// of the pinned release 80fb11a) picks for a file type such as Q3_K_M or IQ2_M, so that a
// model can be planned at any quant from any GGUF of it — another quant, f16, or a
// metadata-only header — before the weights are downloaded.
//
// A recipe is a base type plus rules that give some tensors another type: the output matrix
// (and a tied token embedding) gets q6_K (q5_K for the 1–2-bit i-quants, q8_0 for Q8_0),
// attention-V-like matrices (attn_v, the fused attn_qkv of linear-attention layers, attn_kv_b)
// often get more bits, ffn_down gets more bits in some layers (the first 1/8 or 1/16, or the
// "use more bits" pattern: first and last 1/8 and every third layer between), attn_output and
// attn_q/attn_k move for some recipes, 8-expert models and 70B llamas have their own bumps.
// The rules are a data table in quant_recipe.cc, restated from the engine's selection logic.
//
// What the quantizer never touches keeps the type it has in the source file: tensors with
// fewer than two dimensions, names not ending in "weight", norms, the MoE router, SSM
// convolution kernels and a few small per-architecture tables. A row whose length is not a
// multiple of the chosen type's block falls back as the engine does (256-element i-quants to
// iq4_nl, q2_K/q3_K to q4_0, q4_K to q5_0, q5_K to q5_1, q6_K to q8_0; f16 when even that
// block does not divide the row).
//
// Assumptions, stated wherever the figures are shown: an importance matrix was used (it is
// for published i-quants; RecipeOptions::imatrix turns that off), and no manual overrides
// (--tensor-type, --output-tensor-type, --token-embedding-type, --pure). Uploads that override
// types (bartowski's *_L files, unsloth's UD mixes) differ; docs/PLANNING.md says by how much.
//
// Pure functions; thread-compatible.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/ggml_type.h"
#include "util/result.h"

namespace kvgate::plan {

// The quantizer's coarse tensor categories (by name, as the engine matches them).
enum class TensorClass {
  kTokenEmbd,  // token_embd.weight, per_layer_token_embd.weight
  kOutput,     // output.weight
  kAttnQ,
  kAttnK,
  kAttnV,  // attn_v, attn_qkv (fused QKV, e.g. gated-delta-net layers) and attn_kv_b
  kAttnOutput,
  kFfnUp,  // ffn_up, ffn_up_exps, ffn_up_shexp, ...
  kFfnGate,
  kFfnDown,
  kOther,
};
TensorClass classify_tensor(std::string_view name);

// Whether the quantizer re-types this tensor at all (else it keeps its stored type).
bool quantizer_retypes(std::string_view name, uint32_t n_dims);

struct QuantRecipe;  // defined in quant_recipes.h

// Case-insensitive: "Q3_K_M", "q3_k_m", "iq2_m". nullptr when unknown.
const QuantRecipe* find_quant_recipe(std::string_view name);
// The recipe's canonical name ("Q3_K_M").
std::string_view recipe_name(const QuantRecipe& recipe);
// All recipe names, in llama-quantize's order.
std::vector<std::string_view> quant_recipe_names();

// The model facts the rules look at.
struct RecipeModel {
  std::string arch;          // general.architecture ("falcon" and 70B-class models have own rules)
  uint32_t n_layer_all = 0;  // block_count
  uint32_t n_head = 0;       // of layer 0
  uint32_t n_head_kv = 0;    // of layer 0
  uint32_t n_expert = 0;
};

struct TensorIn {
  std::string_view name;
  uint32_t n_dims = 0;
  std::array<uint64_t, 4> ne{1, 1, 1, 1};  // ne[0] is the row length
  gguf::GgmlType stored = gguf::GgmlType::F32;
  uint64_t stored_bytes = 0;
};

struct TensorOut {
  gguf::GgmlType type = gguf::GgmlType::F32;
  uint64_t bytes = 0;
  bool fallback = false;  // the recipe's type did not fit the row length
};

struct RecipeOptions {
  bool imatrix = true;  // quantized with an importance matrix
};

// The type and size of every tensor (same order as `tensors`) as the quantizer would write
// them. Errors: a size that overflows 64 bits, a type without a layout.
Result<std::vector<TensorOut>> lay_out_weights(const QuantRecipe& recipe, const RecipeModel& model,
                                               std::span<const TensorIn> tensors,
                                               const RecipeOptions& options = {});

}  // namespace kvgate::plan
