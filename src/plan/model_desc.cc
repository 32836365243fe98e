#include "plan/model_desc.h"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

#include "plan/arch_rules.h"

namespace kvgate::plan {
namespace {

// "blk.12.attn_q.weight" → 12; nullopt for non-block tensors.
std::optional<uint32_t> block_index(std::string_view name) {
  constexpr std::string_view kPrefix = "blk.";
  if (name.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  name.remove_prefix(kPrefix.size());
  uint32_t index = 0;
  auto [ptr, ec] = std::from_chars(name.data(), name.data() + name.size(), index);
  if (ec != std::errc() || ptr == name.data() || ptr == name.data() + name.size() || *ptr != '.') return std::nullopt;
  return index;
}

uint32_t vocab_size(const gguf::File& f, const std::string& arch) {
  if (const gguf::Value* tokens = f.find("tokenizer.ggml.tokens"); tokens != nullptr && tokens->is_array()) {
    return static_cast<uint32_t>(std::min<uint64_t>(tokens->size(), UINT32_MAX));
  }
  if (auto n = f.get_uint(arch + ".vocab_size"); n && *n <= UINT32_MAX) return static_cast<uint32_t>(*n);
  if (const gguf::TensorInfo* t = f.find_tensor("token_embd.weight"); t != nullptr && t->n_dims >= 2) {
    return static_cast<uint32_t>(std::min<uint64_t>(t->ne[1], UINT32_MAX));
  }
  return 0;
}

// Each tensor's type and bytes: the file's, or the recipe's layout of the same shapes.
Result<std::vector<TensorOut>> tensor_layout(const gguf::File& f, const ModelDescriptor& d, const DescribeOptions& o) {
  std::vector<TensorIn> in;
  in.reserve(f.tensors().size());
  for (const auto& t : f.tensors()) {
    in.push_back({.name = t.name, .n_dims = t.n_dims, .ne = {t.ne[0], t.ne[1], t.ne[2], t.ne[3]}, .stored = t.type,
                  .stored_bytes = t.n_bytes});
  }
  if (o.weights == nullptr) {
    std::vector<TensorOut> out;
    out.reserve(in.size());
    for (const auto& t : in) out.push_back({t.stored, t.stored_bytes, false});
    return out;
  }
  const LayerDesc* first = d.layers.empty() ? nullptr : &d.layers[0];
  RecipeModel model{.arch = d.arch,
                    .n_layer_all = d.n_layer_all,
                    .n_head = first ? first->n_head : 0,
                    .n_head_kv = first ? first->n_head_kv : 0,
                    .n_expert = d.n_expert};
  return lay_out_weights(*o.weights, model, in, o.recipe);
}

Status sum_weights(const gguf::File& f, const DescribeOptions& o, ModelDescriptor& d) {
  KV_ASSIGN_OR_RETURN(std::vector<TensorOut> layout, tensor_layout(f, d, o));
  bool has_output = false;
  for (size_t i = 0; i < layout.size(); ++i) {
    const gguf::TensorInfo& t = f.tensors()[i];
    const uint64_t bytes = layout[i].bytes;
    if (layout[i].fallback) ++d.weights_fallbacks;
    const std::string type = gguf::ggml_type_name(layout[i].type);
    auto total = std::find_if(d.weight_types.begin(), d.weight_types.end(),
                              [&](const ModelDescriptor::TypeTotal& x) { return x.type == type; });
    if (total == d.weight_types.end()) total = d.weight_types.insert(d.weight_types.end(), {type, 0, 0});
    ++total->tensors;
    total->bytes += bytes;
    d.tensor_bytes += bytes;
    if (t.name == "token_embd.weight") {
      d.token_embd_bytes += bytes;
      continue;
    }
    if (t.name == "output.weight") has_output = true;
    if (auto il = block_index(t.name); il && *il < d.n_layer_all) {
      d.layers[*il].weight_bytes += bytes;
    } else {
      d.output_bytes += bytes;
    }
  }
  std::stable_sort(d.weight_types.begin(), d.weight_types.end(),
                   [](const auto& a, const auto& b) { return a.bytes > b.bytes; });
  d.tied_output = !has_output;
  if (o.weights != nullptr) {
    d.weights_recipe = std::string(recipe_name(*o.weights));
    d.weights_imatrix = o.recipe.imatrix;
  }
  return {};
}

}  // namespace

uint32_t ModelDescriptor::count_kv_layers(bool swa_cache) const {
  uint32_t n = 0;
  for (const auto& l : layers) n += l.kv && l.swa == swa_cache ? 1 : 0;
  return n;
}

uint32_t ModelDescriptor::count_recurrent_layers() const {
  uint32_t n = 0;
  for (const auto& l : layers) n += l.recurrent ? 1 : 0;
  return n;
}

uint32_t ModelDescriptor::count_indexer_layers() const {
  uint32_t n = 0;
  for (const auto& l : layers) n += l.indexer ? 1 : 0;
  return n;
}

Result<ModelDescriptor> describe_model(const gguf::File& f, const DescribeOptions& options) {
  ModelDescriptor d;
  d.arch = std::string(f.architecture());
  if (d.arch.empty()) return Error("general.architecture is missing: not a model GGUF (or a tokenizer-only file)");
  d.name = std::string(f.get_string("general.name").value_or(""));
  d.metadata_only = f.metadata_only();

  const std::string prefix = d.arch + ".";
  auto block_count = f.get_uint(prefix + "block_count");
  if (!block_count || *block_count == 0 || *block_count > 4096) {
    return Error(fmt::format("{}block_count is missing or out of range: kvgate cannot plan a model without layers",
                             prefix));
  }
  d.n_layer_all = static_cast<uint32_t>(*block_count);
  ArchKeys keys(f, d.arch, d.n_layer_all);
  KV_ASSIGN_OR_RETURN(const uint32_t nextn, keys.u32_or("nextn_predict_layers", 0));
  if (nextn > d.n_layer_all) {
    return Error(fmt::format("{}nextn_predict_layers {} exceeds block_count {}", prefix, nextn, d.n_layer_all));
  }
  d.n_layer = d.n_layer_all - nextn;
  KV_ASSIGN_OR_RETURN(d.n_embd, keys.u32_or("embedding_length", 0));
  KV_ASSIGN_OR_RETURN(d.n_ctx_train, keys.u32_or("context_length", 0));
  d.n_vocab = vocab_size(f, d.arch);
  KV_ASSIGN_OR_RETURN(d.n_expert, keys.u32_or("expert_count", 0));
  KV_ASSIGN_OR_RETURN(auto used, keys.per_layer("expert_used_count"));
  if (used) d.n_expert_used = *std::max_element(used->begin(), used->end());
  KV_ASSIGN_OR_RETURN(auto ff_exp, keys.per_layer("expert_feed_forward_length"));
  if (ff_exp) d.n_ff_exp = *std::max_element(ff_exp->begin(), ff_exp->end());

  KV_ASSIGN_OR_RETURN(auto head_keys, keys.per_layer("attention.head_count"));
  const auto n_head = head_keys.value_or(std::vector<uint32_t>(d.n_layer_all, 0));
  KV_ASSIGN_OR_RETURN(auto head_kv_keys, keys.per_layer("attention.head_count_kv"));
  const auto n_head_kv = head_kv_keys.value_or(n_head);
  KV_ASSIGN_OR_RETURN(auto ff_keys, keys.per_layer("feed_forward_length"));
  const auto n_ff = ff_keys.value_or(std::vector<uint32_t>(d.n_layer_all, 0));

  // Head lengths: explicit keys, else n_embd / n_head of layer 0 (the engine's default).
  const uint32_t head0 = n_head.empty() ? 0 : n_head[0];
  uint32_t k_full = 0;
  uint32_t v_full = 0;
  if (head0 > 0) {
    KV_ASSIGN_OR_RETURN(k_full, keys.u32_or("attention.key_length", d.n_embd / head0));
    KV_ASSIGN_OR_RETURN(v_full, keys.u32_or("attention.value_length", d.n_embd / head0));
  }
  KV_ASSIGN_OR_RETURN(const uint32_t k_swa, keys.u32_or("attention.key_length_swa", k_full));
  KV_ASSIGN_OR_RETURN(const uint32_t v_swa, keys.u32_or("attention.value_length_swa", v_full));

  d.layers.resize(d.n_layer_all);
  for (uint32_t il = 0; il < d.n_layer_all; ++il) {
    LayerDesc& l = d.layers[il];
    l.kv = true;
    l.n_head = n_head[il];
    l.n_head_kv = n_head_kv[il];
    l.n_ff = n_ff[il];
    l.k_len = k_full;
    l.v_len = v_full;
  }

  KV_TRY(apply_arch_rules(keys, d));

  for (auto& l : d.layers) {
    if (l.swa) {
      l.k_len = k_swa;
      l.v_len = v_swa;
    }
  }
  KV_TRY(sum_weights(f, options, d));
  return d;
}

}  // namespace kvgate::plan
