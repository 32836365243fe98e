// The recipes of llama-quantize's types as data: for each type name its base type, output and
// token-embedding types and the rules that give some tensors another type, in the engine's
// order (quant_recipe.h applies them). Internal to the weight recipes of src/plan.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "gguf/ggml_type.h"
#include "plan/quant_recipe.h"

namespace kvgate::plan {

// When a rule applies. "Position" is the tensor's place among its kind: for attention-V-like
// tensors the ordinal among them in the engine's order (blocks in order, names sorted within a
// block) out of how many there are; for ffn_down/gate/up the layer (MoE: from the name, else
// the ordinal) out of block_count.
enum class When : uint8_t {
  kAlways,
  kFirstTwo,        // position < 2
  kFirstFour,       // position < 4
  kFirstEighth,     // position < n / 8
  kFirstSixteenth,  // position < n / 16
  kMoreBits,        // position < n/8, or ≥ 7n/8, or (position − n/8) % 3 == 2
  kMiddle,          // n/8 ≤ position < 7n/8
  kGqa4,            // n_head / n_head_kv ≥ 4
  kGqa4OrExperts4,  // that, or at least 4 experts
  kExperts8,        // exactly 8 experts (Mixtral-style)
  kNotExperts8,
  kFalcon,
  kNotFalcon,
  kImatrix,
  kNoImatrix,
  kStacked,  // a 3-D tensor (stacked experts)
};

// The rule applies to tensors of `cls` (kOther with `any` set: every class but the
// embedding and output) when both conditions hold; the first matching rule of a recipe wins;
// none: the recipe's base type.
struct Rule {
  TensorClass cls;
  gguf::GgmlType type;
  When when = When::kAlways;
  When also = When::kAlways;
  bool any = false;
};

enum class Family {
  kPlain,     // f32/f16/bf16: every re-typed tensor takes the base type, no rules
  kStandard,  // k-quants, legacy quants, 3-4-bit i-quants, ternary
  kLowBit,    // IQ1_*/IQ2_*: the engine's own branch (ffn_down by ordinal, no 8-expert q8_0 bump)
  kMxfp4,     // MXFP4_MOE: stacked experts mxfp4, everything else q8_0
};

struct QuantRecipe {
  std::string_view name;
  gguf::GgmlType base;
  Family family;
  gguf::GgmlType output;                     // output.weight, and token_embd when tied
  std::optional<gguf::GgmlType> token_embd;  // an untied token_embd (nullopt: the base type)
  std::vector<Rule> rules;
};

// Every recipe, in llama-quantize's order of types.
const std::vector<QuantRecipe>& recipes();

}  // namespace kvgate::plan
