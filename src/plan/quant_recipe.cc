#include "plan/quant_recipe.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <numeric>
#include <optional>

#include <fmt/format.h>

#include "plan/quant_recipes.h"

namespace kvgate::plan {
namespace {

using gguf::GgmlType;
using T = TensorClass;
using W = When;
using G = GgmlType;

// Rules every standard recipe applies first: 8-expert models get q8_0 attention V and K
// ("trades just ~128MB" in the engine's words).
constexpr std::array<Rule, 2> kStandardFirst = {Rule{T::kAttnV, G::Q8_0, W::kExperts8},
                                                Rule{T::kAttnK, G::Q8_0, W::kExperts8}};

// Where a quantized type goes when a row is not a multiple of its block.
std::optional<GgmlType> fallback_of(GgmlType t) {
  switch (t) {
    case G::IQ1_S:
    case G::IQ1_M:
    case G::IQ2_XXS:
    case G::IQ2_XS:
    case G::IQ2_S:
    case G::IQ3_XXS:
    case G::IQ3_S:
    case G::IQ4_XS:
      return G::IQ4_NL;
    case G::Q2_0:
    case G::Q2_K:
    case G::Q3_K:
    case G::TQ1_0:
    case G::TQ2_0:
      return G::Q4_0;
    case G::Q4_K:
      return G::Q5_0;
    case G::Q5_K:
      return G::Q5_1;
    case G::Q6_K:
      return G::Q8_0;
    default:
      return std::nullopt;  // 32-element blocks: no smaller block to go to
  }
}

uint32_t block_of(GgmlType t) {
  auto traits = gguf::ggml_type_traits(t);
  return traits ? traits->block_size : 1;
}

bool is_quantized(GgmlType t) {
  auto traits = gguf::ggml_type_traits(t);
  return traits && traits->quantized;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

// "blk.12.ffn_down.weight" → 12; -1 for tensors outside the blocks (the loader's order key).
int64_t block_of_name(std::string_view name) {
  constexpr std::string_view kPrefix = "blk.";
  if (name.substr(0, kPrefix.size()) != kPrefix) return -1;
  int64_t il = -1;
  const char* begin = name.data() + kPrefix.size();
  auto [ptr, ec] = std::from_chars(begin, name.data() + name.size(), il);
  if (ec != std::errc() || ptr == begin || ptr == name.data() + name.size() || *ptr != '.') return -1;
  return il;
}

struct Position {
  int64_t i = 0;
  int64_t n = 1;
};

struct Context {
  const RecipeModel& model;
  const RecipeOptions& options;
  bool falcon;
  uint32_t gqa;
};

bool holds(When w, const Context& c, Position pos, const TensorIn& t) {
  const int64_t i = pos.i;
  const int64_t n = pos.n;
  switch (w) {
    case W::kAlways:
      return true;
    case W::kFirstTwo:
      return i < 2;
    case W::kFirstFour:
      return i < 4;
    case W::kFirstEighth:
      return i < n / 8;
    case W::kFirstSixteenth:
      return i < n / 16;
    case W::kMoreBits:
      return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
    case W::kMiddle:
      return i >= n / 8 && i < 7 * n / 8;
    case W::kGqa4:
      return c.gqa >= 4;
    case W::kGqa4OrExperts4:
      return c.gqa >= 4 || c.model.n_expert >= 4;
    case W::kExperts8:
      return c.model.n_expert == 8;
    case W::kNotExperts8:
      return c.model.n_expert != 8;
    case W::kFalcon:
      return c.falcon;
    case W::kNotFalcon:
      return !c.falcon;
    case W::kImatrix:
      return c.options.imatrix;
    case W::kNoImatrix:
      return !c.options.imatrix;
    case W::kStacked:
      return t.n_dims >= 3 && t.ne[2] > 1;
  }
  return false;
}

// 70B-class models (80 blocks with grouped KV heads) share attn_v across 8 heads, so the
// engine gives attn_v one more step where it would be q3_K or q4_K.
bool seventy_b(const RecipeModel& m) {
  if (m.arch == "llama") return m.n_layer_all == 80 && m.n_head != m.n_head_kv;
  if (m.arch == "qwen2" || m.arch == "deci" || m.arch == "olmo") return m.n_layer_all == 80;
  return m.arch == "jais2" && m.n_layer_all == 68;
}

std::optional<GgmlType> first_match(std::span<const Rule> rules, TensorClass cls, const Context& c,
                                    Position pos, const TensorIn& t) {
  for (const Rule& r : rules) {
    const bool class_ok = r.any ? (cls != T::kTokenEmbd && cls != T::kOutput) : r.cls == cls;
    if (class_ok && holds(r.when, c, pos, t) && holds(r.also, c, pos, t)) return r.type;
  }
  return std::nullopt;
}

GgmlType choose(const QuantRecipe& r, TensorClass cls, bool tied, const Context& c, Position pos,
                const TensorIn& t) {
  if (r.family == Family::kPlain) return r.base;
  const bool as_output = cls == T::kOutput || (tied && cls == T::kTokenEmbd);
  if (as_output) {
    if (r.family == Family::kMxfp4) return G::Q8_0;
    if (c.falcon || t.ne[0] % block_of(r.base) != 0) return G::Q8_0;
    return r.output;
  }
  if (cls == T::kTokenEmbd) return r.token_embd.value_or(r.base);
  if (r.family == Family::kStandard) {
    if (auto hit = first_match(kStandardFirst, cls, c, pos, t)) return *hit;
  }
  GgmlType type = first_match(r.rules, cls, c, pos, t).value_or(r.base);
  if (r.family == Family::kStandard && cls == T::kAttnV && seventy_b(c.model) &&
      (type == G::Q3_K || type == G::Q4_K)) {
    type = G::Q5_K;
  }
  return type;
}

// The engine's fallback for rows that do not divide into the type's blocks.
GgmlType fit_row(GgmlType type, uint64_t ncols, bool& fell_back) {
  if (ncols % block_of(type) == 0) return type;
  fell_back = true;
  GgmlType next = fallback_of(type).value_or(type);
  if (ncols % block_of(next) != 0) next = G::F16;
  return next;
}

}  // namespace

TensorClass classify_tensor(std::string_view name) {
  if (name == "output.weight") return T::kOutput;
  if (name == "token_embd.weight" || name == "per_layer_token_embd.weight") return T::kTokenEmbd;
  if (contains(name, "attn_qkv.weight") || contains(name, "attn_kv_b.weight") ||
      contains(name, "attn_v.weight")) {
    return T::kAttnV;
  }
  if (contains(name, "attn_k.weight")) return T::kAttnK;
  if (contains(name, "attn_q.weight")) return T::kAttnQ;
  if (contains(name, "attn_output.weight")) return T::kAttnOutput;
  if (contains(name, "ffn_up")) return T::kFfnUp;
  if (contains(name, "ffn_gate")) return T::kFfnGate;
  if (contains(name, "ffn_down")) return T::kFfnDown;
  return T::kOther;
}

bool quantizer_retypes(std::string_view name, uint32_t n_dims) {
  if (n_dims < 2) return false;
  if (name.size() < 6 || name.substr(name.size() - 6) != "weight") return false;
  // Kept as they are: norms, the MoE router and routing tables, small per-architecture
  // tables, positional and token-type embeddings, SSM/short convolutions, RWKV's small
  // matrices, T5's relative bias, multimodal patch/position tensors, audio codebooks.
  static constexpr std::string_view kKept[] = {"_norm.weight",
                                               "ffn_gate_inp.weight",
                                               "ffn_gate_tid2eid.weight",
                                               "altup",
                                               "laurel",
                                               "per_layer_model_proj",
                                               "ssm_conv1d",
                                               "shortconv.conv.weight",
                                               "indexer.k_proj.weight",
                                               "indexer.q_proj.weight",
                                               "time_mix_first.weight",
                                               "time_mix_w0.weight",
                                               "time_mix_w1.weight",
                                               "time_mix_w2.weight",
                                               "time_mix_v0.weight",
                                               "time_mix_v1.weight",
                                               "time_mix_v2.weight",
                                               "time_mix_a0.weight",
                                               "time_mix_a1.weight",
                                               "time_mix_a2.weight",
                                               "time_mix_g1.weight",
                                               "time_mix_g2.weight",
                                               "time_mix_decay_w1.weight",
                                               "time_mix_decay_w2.weight",
                                               "time_mix_lerp_fused.weight",
                                               "attn_rel_b.weight",
                                               ".position_embd",
                                               "sam.pos_embd",
                                               "sam.neck.",
                                               "sam.net_",
                                               ".rel_pos",
                                               ".patch_embd",
                                               ".patch_merger",
                                               "a.rvq.codebook",
                                               "mm.a.code_embd"};
  for (auto part : kKept) {
    if (contains(name, part)) return false;
  }
  return name != "position_embd.weight" && name != "token_types.weight";
}

const QuantRecipe* find_quant_recipe(std::string_view name) {
  for (const auto& r : recipes()) {
    if (iequals(r.name, name)) return &r;
  }
  return nullptr;
}

std::string_view recipe_name(const QuantRecipe& recipe) { return recipe.name; }

std::vector<std::string_view> quant_recipe_names() {
  std::vector<std::string_view> out;
  for (const auto& r : recipes()) out.push_back(r.name);
  return out;
}

Result<std::vector<TensorOut>> lay_out_weights(const QuantRecipe& recipe, const RecipeModel& model,
                                               std::span<const TensorIn> tensors,
                                               const RecipeOptions& options) {
  const Context ctx{model, options, model.arch == "falcon",
                    model.n_head_kv == 0 ? 0 : model.n_head / model.n_head_kv};
  // The loader's order: blocks in order (non-block tensors first), names sorted within.
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const int64_t la = block_of_name(tensors[a].name);
    const int64_t lb = block_of_name(tensors[b].name);
    return la != lb ? la < lb : tensors[a].name < tensors[b].name;
  });
  bool tied = true;
  int64_t n_attn_v = 0;
  for (const auto& t : tensors) {
    const TensorClass cls = classify_tensor(t.name);
    if (cls == T::kOutput) tied = false;
    if (cls == T::kAttnV) ++n_attn_v;
  }
  const int64_t n_layer = std::max<int64_t>(1, model.n_layer_all);
  const bool moe = model.n_expert > 1;
  int64_t i_attn_v = 0;
  int64_t i_ffn[3] = {0, 0, 0};  // down, gate, up

  std::vector<TensorOut> out(tensors.size());
  for (size_t k : order) {
    const TensorIn& t = tensors[k];
    TensorOut& o = out[k];
    if (!quantizer_retypes(t.name, t.n_dims)) {
      o.type = t.stored;
      o.bytes = t.stored_bytes;
      continue;
    }
    const TensorClass cls = classify_tensor(t.name);
    Position pos;
    if (cls == T::kAttnV) {
      pos = {i_attn_v++, n_attn_v};
    } else if (cls == T::kFfnDown || cls == T::kFfnGate || cls == T::kFfnUp) {
      int64_t& counter = i_ffn[cls == T::kFfnDown ? 0 : cls == T::kFfnGate ? 1 : 2];
      const bool by_name = moe && !(recipe.family == Family::kLowBit && cls == T::kFfnDown);
      pos = {by_name ? std::max<int64_t>(0, block_of_name(t.name)) : counter, n_layer};
      ++counter;
    }
    GgmlType type = choose(recipe, cls, tied, ctx, pos, t);
    if (is_quantized(recipe.base)) type = fit_row(type, t.ne[0], o.fallback);
    uint64_t rows = 1;
    for (uint32_t d = 1; d < std::max<uint32_t>(t.n_dims, 1) && d < t.ne.size(); ++d) {
      if (__builtin_mul_overflow(rows, t.ne[d], &rows))
        return Error(fmt::format("{}: row count overflows", t.name));
    }
    KV_ASSIGN_OR_RETURN(uint64_t row, gguf::ggml_row_bytes(type, t.ne[0]));
    if (__builtin_mul_overflow(rows, row, &o.bytes)) return Error(fmt::format("{}: size overflows", t.name));
    o.type = type;
  }
  return out;
}

}  // namespace kvgate::plan
