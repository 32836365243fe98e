#include "plan/arch_rules.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

namespace kvgate::plan {

// ---- ArchKeys -------------------------------------------------------------------------------

bool ArchKeys::has(std::string_view key) const { return file_.find(full(key)) != nullptr; }

bool ArchKeys::is_array(std::string_view key) const {
  const gguf::Value* v = file_.find(full(key));
  return v != nullptr && v->is_array();
}

Result<std::optional<uint32_t>> ArchKeys::u32(std::string_view key) const {
  const std::string name = full(key);
  const gguf::Value* v = file_.find(name);
  if (v == nullptr || v->is_array()) return std::optional<uint32_t>();
  auto value = v->as_uint();
  if (!value && v->as_bool()) value = *v->as_bool() ? 1 : 0;
  if (!value || *value > std::numeric_limits<uint32_t>::max()) {
    return Error(fmt::format("{} must be an unsigned integer below 2^32 (it is {})", name, v->to_display(40)));
  }
  return std::optional<uint32_t>(static_cast<uint32_t>(*value));
}

Result<uint32_t> ArchKeys::u32_or(std::string_view key, uint32_t fallback) const {
  KV_ASSIGN_OR_RETURN(auto value, u32(key));
  return value.value_or(fallback);
}

Result<std::optional<std::vector<uint32_t>>> ArchKeys::per_layer(std::string_view key, uint32_t n) const {
  using Values = std::optional<std::vector<uint32_t>>;
  if (n == 0) n = n_layer_all_;
  const std::string name = full(key);
  const gguf::Value* v = file_.find(name);
  if (v == nullptr) return Values();
  if (!v->is_array()) {
    KV_ASSIGN_OR_RETURN(auto scalar, u32(key));
    if (!scalar) return Values();
    return Values(std::vector<uint32_t>(n, *scalar));
  }
  auto values = v->as_int_array();
  if (!values) return Error(fmt::format("{} must be an array of integers", name));
  if (values->size() != n) {
    return Error(
        fmt::format("{} has {} entries; the engine requires exactly {} (one per layer)", name, values->size(), n));
  }
  std::vector<uint32_t> out;
  out.reserve(n);
  for (int64_t x : *values) {
    if (x < 0 || x > std::numeric_limits<uint32_t>::max()) {
      return Error(fmt::format("{} holds {}, which is not an unsigned 32-bit value", name, x));
    }
    out.push_back(static_cast<uint32_t>(x));
  }
  return Values(std::move(out));
}

namespace {

template <size_t N>
bool one_of(std::string_view arch, const std::string_view (&list)[N]) {
  return std::find(std::begin(list), std::end(list), arch) != std::end(list);
}

// Plain attention: every block (nextn blocks included) holds full-context KV.
constexpr std::string_view kDenseArchs[] = {
    "llama", "llama-embed", "deci", "falcon", "grok", "gpt2", "gptneox", "mpt", "baichuan", "starcoder",
    "refact", "bloom", "stablelm", "qwen", "qwen2", "qwen2moe", "qwen2vl", "qwen3", "qwen3moe", "qwen3vl",
    "qwen3vlmoe", "phi2", "phimoe", "plamo", "codeshell", "orion", "internlm2", "minicpm", "minicpm3", "gemma",
    "starcoder2", "xverse", "command-r", "dbrx", "olmo", "olmoe", "openelm", "arctic", "deepseek", "chatglm",
    "glm4", "glm4moe", "bitnet", "jais", "jais2", "nemotron", "exaone", "granite", "granitemoe",
    "graniteswitch", "chameleon", "plm", "bailingmoe", "bailingmoe2", "dots1", "arcee", "ernie4_5",
    "ernie4_5-moe", "hunyuan-moe", "hunyuan-dense", "hunyuan_vl", "smollm3", "seed_oss", "grovemoe",
    "apertus", "minimax-m2", "cogvlm", "mistral3", "maincoder",
};

// Architectures whose main context filters the nextn (MTP) blocks out of the KV cache.
constexpr std::string_view kNextnFiltered[] = {
    "qwen3next", "qwen35", "qwen35moe", "minimax-01", "step35", "hy_v3", "glm-dsa", "mimo2", "deepseek32",
};

void set_swa_period(ModelDescriptor& d, uint32_t period, bool dense_first) {
  for (uint32_t il = 0; il < d.n_layer_all; ++il) {
    bool swa = false;
    if (il < d.n_layer) {
      swa = period == 0 || (dense_first ? il % period != 0 : il % period < period - 1);
    }
    d.layers[il].swa = swa;
  }
  d.notes.push_back(fmt::format("sliding window of {} tokens on {} of every {} layers (the full-attention layer {})",
                                d.n_swa, period == 0 ? 0 : period - 1, period, dense_first ? "first" : "last"));
}

void set_swa_flags(ModelDescriptor& d, const std::vector<uint32_t>& flags, std::string_view source) {
  for (uint32_t il = 0; il < d.n_layer_all; ++il) d.layers[il].swa = il < flags.size() && flags[il] != 0;
  d.notes.push_back(fmt::format("sliding window {} tokens on the layers flagged by {}", d.n_swa, source));
}

// Sliding window on a period read from the pattern key as a scalar; an array there leaves the
// default `fallback` (as the engine's scalar read does).
Status swa_every(const ArchKeys& k, ModelDescriptor& d, uint32_t fallback, bool dense_first) {
  uint32_t period = fallback;
  if (!k.is_array("attention.sliding_window_pattern")) {
    KV_ASSIGN_OR_RETURN(period, k.u32_or("attention.sliding_window_pattern", fallback));
  }
  set_swa_period(d, period, dense_first);
  return {};
}

Status require_window(const ArchKeys& k, ModelDescriptor& d) {
  KV_ASSIGN_OR_RETURN(auto w, k.u32("attention.sliding_window"));
  if (!w) return Error(fmt::format("{}: {}.attention.sliding_window is required by the engine", d.arch, d.arch));
  d.n_swa = *w;
  return {};
}

// Pattern given either as a scalar period or as per-layer flags (n_layer entries).
Status period_or_flags(const ArchKeys& k, ModelDescriptor& d, bool dense_first) {
  if (k.is_array("attention.sliding_window_pattern")) {
    KV_ASSIGN_OR_RETURN(auto flags, k.per_layer("attention.sliding_window_pattern", d.n_layer));
    if (flags) set_swa_flags(d, *flags, "attention.sliding_window_pattern");
    return {};
  }
  KV_ASSIGN_OR_RETURN(auto p, k.u32("attention.sliding_window_pattern"));
  if (p) {
    set_swa_period(d, *p, dense_first);
  } else {
    d.notes.push_back("no attention.sliding_window_pattern: the engine marks no layer as sliding-window");
  }
  return {};
}

Status mamba_state(const ArchKeys& k, ModelDescriptor& d) {
  KV_ASSIGN_OR_RETURN(d.ssm_d_conv, k.u32_or("ssm.conv_kernel", 0));
  KV_ASSIGN_OR_RETURN(d.ssm_d_inner, k.u32_or("ssm.inner_size", 0));
  KV_ASSIGN_OR_RETURN(d.ssm_d_state, k.u32_or("ssm.state_size", 0));
  KV_ASSIGN_OR_RETURN(d.ssm_n_group, k.u32_or("ssm.group_count", 0));
  KV_ASSIGN_OR_RETURN(d.ssm_dt_rank, k.u32_or("ssm.time_step_rank", 0));
  const uint64_t conv = d.ssm_d_conv > 0 ? d.ssm_d_conv - 1 : 0;
  d.n_embd_r = conv * (uint64_t{d.ssm_d_inner} + 2ULL * d.ssm_n_group * d.ssm_d_state);
  d.n_embd_s = uint64_t{d.ssm_d_state} * d.ssm_d_inner;
  return {};
}

// Hybrids that mark recurrent layers with head_count_kv = 0.
void recurrent_by_head_kv(ModelDescriptor& d) {
  for (uint32_t il = 0; il < d.n_layer; ++il) {
    LayerDesc& l = d.layers[il];
    l.recurrent = l.n_head_kv == 0;
    l.kv = !l.recurrent;
  }
  d.notes.push_back("recurrent layers are those with head_count_kv = 0; the others hold KV");
}

// qwen3next / qwen35 / minimax-01: recurrent_layers flags, or full attention every `interval`.
Status recurrent_by_interval(const ArchKeys& k, ModelDescriptor& d, uint32_t default_interval) {
  std::vector<uint32_t> recr(d.n_layer_all, 0);
  KV_ASSIGN_OR_RETURN(auto flags, k.per_layer("attention.recurrent_layers"));
  if (flags) {
    recr = *flags;
    d.notes.push_back("recurrent layers from attention.recurrent_layers");
  } else {
    KV_ASSIGN_OR_RETURN(uint32_t interval, k.u32_or("full_attention_interval", default_interval));
    if (interval == 0) interval = 1;
    for (uint32_t il = 0; il < d.n_layer_all; ++il) recr[il] = il < d.n_layer && (il + 1) % interval != 0 ? 1 : 0;
    d.notes.push_back(fmt::format("full attention every {} layers (layer {} first); the others are recurrent",
                                  interval, interval - 1));
  }
  for (uint32_t il = 0; il < d.n_layer_all; ++il) {
    LayerDesc& l = d.layers[il];
    l.recurrent = il < d.n_layer && recr[il] != 0;
    l.kv = il < d.n_layer && !l.recurrent;
  }
  return {};
}

Status mla_shape(const ArchKeys& k, ModelDescriptor& d) {
  KV_ASSIGN_OR_RETURN(d.kv_lora_rank, k.u32_or("attention.kv_lora_rank", 0));
  KV_ASSIGN_OR_RETURN(d.n_rot, k.u32_or("rope.dimension_count", 0));
  KV_ASSIGN_OR_RETURN(auto k_mla, k.u32("attention.key_length_mla"));
  KV_ASSIGN_OR_RETURN(auto v_mla, k.u32("attention.value_length_mla"));
  d.mla = k_mla.has_value() && v_mla.has_value() && *k_mla != 0 && *v_mla != 0;
  if (d.mla) {
    d.k_len_mla = *k_mla;
    d.v_len_mla = *v_mla;
    d.notes.push_back(fmt::format("MLA: compressed K of {} per token and layer, no V cache (mainline)",
                                  d.layers.empty() ? 0 : d.layers[0].k_len * d.layers[0].n_head_kv));
  } else if (d.kv_lora_rank > 0) {
    // A GGUF converted before MLA support: the engine runs it as plain multi-head attention.
    d.k_len_mla = d.layers.empty() ? 0 : d.layers[0].k_len;
    d.v_len_mla = d.layers.empty() ? 0 : d.layers[0].v_len;
    d.notes.push_back("no key_length_mla: legacy (pre-MLA) GGUF, run as plain multi-head attention with full K and V");
  }
  return {};
}

Status swa_rules(const ArchKeys& k, ModelDescriptor& d, bool& handled) {
  handled = true;
  const std::string& a = d.arch;
  KV_ASSIGN_OR_RETURN(auto window, k.u32("attention.sliding_window"));
  if (a == "gemma2") {
    d.n_swa = window.value_or(4096);
    KV_TRY(swa_every(k, d, 2, false));
  } else if (a == "gemma3") {
    if (window && *window > 0) {
      d.n_swa = *window;
      KV_TRY(swa_every(k, d, 6, false));
    } else {
      d.notes.push_back("no sliding_window: every layer is full attention");
    }
  } else if (a == "gemma3n") {
    KV_TRY(require_window(k, d));
    KV_TRY(swa_every(k, d, 5, false));
    for (uint32_t il = 20; il < d.n_layer_all; ++il) d.layers[il].kv = false;
    d.notes.push_back("only the first 20 layers hold KV; later layers reuse it");
  } else if (a == "gemma4") {
    KV_TRY(require_window(k, d));
    KV_ASSIGN_OR_RETURN(auto flags, k.per_layer("attention.sliding_window_pattern", d.n_layer));
    if (flags) {
      set_swa_flags(d, *flags, "attention.sliding_window_pattern");
    } else {
      return Error("gemma4: attention.sliding_window_pattern (one flag per layer) is required by the engine");
    }
    KV_ASSIGN_OR_RETURN(const uint32_t shared, k.u32_or("attention.shared_kv_layers", 0));
    if (shared > 0 && shared <= d.n_layer_all) {
      for (uint32_t il = d.n_layer_all - shared; il < d.n_layer_all; ++il) d.layers[il].kv = false;
      d.notes.push_back(fmt::format("the last {} layers share earlier layers' KV (attention.shared_kv_layers)", shared));
    }
  } else if (a == "gpt-oss") {
    KV_TRY(require_window(k, d));
    KV_TRY(swa_every(k, d, 2, false));
  } else if (a == "cohere2") {
    KV_TRY(require_window(k, d));
    KV_TRY(swa_every(k, d, 4, false));
  } else if (a == "cohere2moe") {
    KV_TRY(require_window(k, d));
    KV_TRY(period_or_flags(k, d, true));
  } else if (a == "muse-glimmer") {
    KV_TRY(require_window(k, d));
    KV_TRY(period_or_flags(k, d, false));
  } else if (a == "mellum") {
    if (window && *window > 0) {
      d.n_swa = *window;
      KV_TRY(period_or_flags(k, d, false));
    }
  } else if (a == "llama4") {
    if (window && *window == 0) {
      d.notes.push_back("sliding_window = 0: chunked attention disabled");
    } else {
      d.n_swa = 8192;
      d.swa_chunked = true;
      KV_TRY(swa_every(k, d, 4, false));
      d.notes.push_back("chunked attention (8192-token chunks) on 3 of every 4 layers");
    }
  } else if (a == "exaone4") {
    if (d.n_layer == 64) {
      d.n_swa = window.value_or(4096);
      KV_TRY(swa_every(k, d, 4, false));
    }
  } else if (a == "exaone-moe") {
    KV_TRY(require_window(k, d));
    KV_TRY(swa_every(k, d, 4, false));
  } else if (a == "smallthinker") {
    if (window && *window > 0) {
      d.n_swa = 4096;  // the engine fixes the window at 4096 whatever the key says
      KV_TRY(swa_every(k, d, 4, true));
    }
  } else if (a == "laguna") {
    if (window && *window > 0) {
      d.n_swa = *window;
      KV_TRY(swa_every(k, d, 4, true));
    } else {
      d.notes.push_back("no sliding_window: every layer is full attention");
    }
  } else if (a == "afmoe" || a == "olmo2" || a == "plamo3") {
    if (window && *window > 0) {
      d.n_swa = *window;
      KV_TRY(swa_every(k, d, a == "plamo3" ? 8 : 4, false));
    }
  } else if (a == "granite_swa" || a == "step35" || a == "mimo2") {
    KV_TRY(require_window(k, d));
    const uint32_t n = a == "step35" ? d.n_layer_all : d.n_layer;
    KV_ASSIGN_OR_RETURN(auto flags, k.per_layer("attention.sliding_window_pattern", n));
    if (flags) set_swa_flags(d, *flags, "attention.sliding_window_pattern");
  } else {
    handled = false;
  }
  return {};
}

Status hybrid_rules(const ArchKeys& k, ModelDescriptor& d, bool& handled) {
  handled = true;
  const std::string& a = d.arch;
  if (a == "mamba" || a == "mamba2") {
    KV_TRY(mamba_state(k, d));
    for (uint32_t il = 0; il < d.n_layer_all; ++il) {
      d.layers[il].kv = false;
      d.layers[il].recurrent = il < d.n_layer;
    }
    d.notes.push_back("state-space model: every layer holds recurrent state, none holds KV");
  } else if (a == "rwkv6" || a == "rwkv6qwen2" || a == "rwkv7" || a == "arwkv7") {
    KV_ASSIGN_OR_RETURN(const uint64_t shift, k.u32_or("token_shift_count", 2));
    KV_ASSIGN_OR_RETURN(const uint64_t head_size, k.u32_or("wkv.head_size", 0));
    d.n_embd_r = shift * d.n_embd;
    d.n_embd_s = uint64_t{d.n_embd} * head_size;
    for (uint32_t il = 0; il < d.n_layer_all; ++il) {
      d.layers[il].kv = false;
      d.layers[il].recurrent = il < d.n_layer;
    }
    d.notes.push_back("RWKV: every layer holds token-shift and WKV state, none holds KV");
  } else if (a == "jamba" || a == "granitehybrid" || a == "plamo2") {
    KV_TRY(mamba_state(k, d));
    recurrent_by_head_kv(d);
  } else if (a == "kimi-linear") {
    KV_ASSIGN_OR_RETURN(const uint32_t kda, k.u32_or("kda.head_dim", 0));
    KV_ASSIGN_OR_RETURN(const uint32_t d_conv, k.u32_or("ssm.conv_kernel", 0));
    const uint64_t n_head = d.layers.empty() ? 0 : d.layers[0].n_head;
    d.n_embd_r = 3ULL * (d_conv > 0 ? d_conv - 1 : 3) * n_head * kda;
    d.n_embd_s = uint64_t{kda} * kda * n_head;
    recurrent_by_head_kv(d);
    KV_TRY(mla_shape(k, d));
  } else if (a == "lfm2" || a == "lfm2moe") {
    KV_ASSIGN_OR_RETURN(const uint64_t l_cache, k.u32_or("shortconv.l_cache", 0));
    d.n_embd_r = uint64_t{d.n_embd} * (l_cache > 0 ? l_cache - 1 : 0);
    d.n_embd_s = 0;
    recurrent_by_head_kv(d);
    KV_ASSIGN_OR_RETURN(auto window, k.u32("attention.sliding_window"));
    if (a == "lfm2" && window && *window > 0) {
      d.n_swa = *window;
      for (uint32_t il = 0; il < d.n_layer; ++il) d.layers[il].swa = !d.layers[il].recurrent;
      d.notes.push_back(fmt::format("every attention layer uses a {}-token sliding window", d.n_swa));
    }
  } else if (a == "nemotron_h" || a == "nemotron_h_moe") {
    KV_TRY(mamba_state(k, d));
    for (uint32_t il = 0; il < d.n_layer_all; ++il) {
      LayerDesc& l = d.layers[il];
      l.recurrent = il < d.n_layer && l.n_head_kv == 0 && l.n_ff == 0;
      l.kv = !l.recurrent && l.n_ff == 0;
    }
    d.notes.push_back("Mamba layers: head_count_kv = 0 and feed_forward_length = 0; attention layers: "
                      "head_count_kv > 0 and feed_forward_length = 0; MLP layers hold nothing");
  } else if (a == "qwen3next" || a == "qwen35" || a == "qwen35moe") {
    KV_TRY(mamba_state(k, d));
    KV_TRY(recurrent_by_interval(k, d, 4));
  } else if (a == "minimax-01") {
    const uint64_t head = d.layers.empty() ? 0 : d.layers[0].k_len;
    const uint64_t n_head = d.layers.empty() ? 0 : d.layers[0].n_head;
    d.n_embd_r = 0;
    d.n_embd_s = head * head * n_head;
    KV_TRY(recurrent_by_interval(k, d, 8));
  } else if (a == "falcon-h1") {
    KV_TRY(mamba_state(k, d));
    for (uint32_t il = 0; il < d.n_layer_all; ++il) d.layers[il].recurrent = il < d.n_layer;
    d.notes.push_back("every layer holds both KV and recurrent state");
  } else {
    handled = false;
  }
  return {};
}

Status indexer_rules(const ArchKeys& k, ModelDescriptor& d) {
  KV_ASSIGN_OR_RETURN(d.indexer_k_len, k.u32_or("attention.indexer.key_length", 0));
  if (d.indexer_k_len == 0) return {};
  std::vector<uint32_t> full(d.n_layer, 1);
  if (d.arch == "glm-dsa") {
    KV_ASSIGN_OR_RETURN(auto types, k.per_layer("attention.indexer.types", d.n_layer));
    if (types) {
      full = *types;
      d.notes.push_back("indexer key cache on the layers flagged by attention.indexer.types");
    } else if (d.n_ctx_train >= 1048576) {
      // GLM-5.2's published layout: the first two layers, then every fourth from layer 2.
      for (uint32_t il = 0; il < d.n_layer; ++il) full[il] = il < 2 || (il - 2) % 4 == 0 ? 1 : 0;
      d.notes.push_back("indexer key cache on GLM-5.2's default layers (0, 1, then every 4th from 2)");
    } else {
      d.notes.push_back("indexer key cache on every layer (GLM-5/5.1 layout)");
    }
  }
  for (uint32_t il = 0; il < d.n_layer; ++il) d.layers[il].indexer = full[il] != 0;
  return {};
}

}  // namespace

Status apply_arch_rules(const ArchKeys& k, ModelDescriptor& d) {
  const std::string& a = d.arch;
  for (uint32_t il = 0; il < d.n_layer_all; ++il) d.layers[il].nextn = il >= d.n_layer;

  bool handled = one_of(a, kDenseArchs);
  if (handled) {
    d.notes.push_back("dense attention: every block holds full-context KV");
  } else if (a == "phi3") {
    handled = true;
    d.notes.push_back("the engine disables phi3's sliding window: every block holds full-context KV");
  } else if (a == "deepseek2" || a == "deepseek32" || a == "glm-dsa") {
    handled = true;
    KV_TRY(mla_shape(k, d));
    KV_TRY(indexer_rules(k, d));
  } else {
    KV_TRY(swa_rules(k, d, handled));
    if (!handled) KV_TRY(hybrid_rules(k, d, handled));
  }

  if (one_of(a, kNextnFiltered) && d.n_layer < d.n_layer_all) {
    for (uint32_t il = d.n_layer; il < d.n_layer_all; ++il) {
      d.layers[il].kv = false;
      d.layers[il].recurrent = false;
    }
    d.notes.push_back(fmt::format("the {} nextn (MTP) block(s) hold no KV in the main context", d.n_layer_all - d.n_layer));
  } else if (d.n_layer < d.n_layer_all && handled) {
    d.notes.push_back(fmt::format("the {} nextn (MTP) block(s) also hold KV in the main context (the engine does not "
                                  "filter them for this architecture)",
                                  d.n_layer_all - d.n_layer));
  }

  d.known_arch = handled;
  if (!handled) {
    d.notes.push_back(fmt::format("architecture '{}' has no kvgate rules: assumed dense (every block holds "
                                  "full-context KV); all figures are estimates",
                                  a));
  }
  return {};
}

}  // namespace kvgate::plan
