#include "gguf/synth.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <functional>

#include <fmt/format.h>

#include "gguf/qwen3_style_template.h"
#include "gguf/writer.h"

namespace kvgate::gguf {
namespace {

// ---- deterministic random numbers -------------------------------------------------------

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t hash_name(std::string_view s, uint64_t seed) {
  uint64_t h = 0xcbf29ce484222325ULL ^ seed;
  for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ULL;
  return h;
}

// Uniform in [lo, hi).
class Uniform {
 public:
  Uniform(uint64_t seed, float lo, float hi) : state_(seed), lo_(lo), span_(hi - lo) {}
  float next() {
    const auto bits = static_cast<uint32_t>(splitmix64(state_) >> 40);  // 24 bits
    return lo_ + span_ * static_cast<float>(bits) / static_cast<float>(1U << 24);
  }

 private:
  uint64_t state_;
  float lo_;
  float span_;
};

// ---- element encodings ------------------------------------------------------------------

uint16_t float_to_half(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000U;
  int32_t exp = static_cast<int32_t>((x >> 23) & 0xffU) - 127 + 15;
  uint32_t mant = x & 0x7fffffU;
  if (exp <= 0) {  // subnormal or zero in half precision
    if (exp < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000U;
    const auto shift = static_cast<uint32_t>(14 - exp);
    uint32_t half_mant = mant >> shift;
    if ((mant >> (shift - 1)) & 1U) ++half_mant;  // round half up
    return static_cast<uint16_t>(sign | half_mant);
  }
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00U);  // overflow → inf (never hit: |w| < 4)
  uint32_t half = sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  // Round to nearest even on the 13 dropped bits.
  const uint32_t rest = mant & 0x1fffU;
  if (rest > 0x1000U || (rest == 0x1000U && (half & 1U))) ++half;
  return static_cast<uint16_t>(half);
}

void store_values(GgmlType type, std::span<std::byte> out, const std::function<float()>& next) {
  switch (type) {
    case GgmlType::F32:
      for (size_t i = 0; i + 4 <= out.size(); i += 4) {
        const float v = next();
        std::memcpy(out.data() + i, &v, 4);
      }
      return;
    case GgmlType::F16:
      for (size_t i = 0; i + 2 <= out.size(); i += 2) {
        const uint16_t h = float_to_half(next());
        std::memcpy(out.data() + i, &h, 2);
      }
      return;
    case GgmlType::BF16:
      for (size_t i = 0; i + 2 <= out.size(); i += 2) {
        const auto b = static_cast<uint16_t>(std::bit_cast<uint32_t>(next()) >> 16);
        std::memcpy(out.data() + i, &b, 2);
      }
      return;
    case GgmlType::Q8_0: {
      // Blocks of 32: an f16 scale d = max|x| / 127, then 32 int8 values round(x / d).
      for (size_t i = 0; i + 34 <= out.size(); i += 34) {
        float x[32];
        float amax = 0;
        for (float& v : x) {
          v = next();
          amax = std::max(amax, std::fabs(v));
        }
        const float d = amax / 127.0F;
        const uint16_t dh = float_to_half(d);
        std::memcpy(out.data() + i, &dh, 2);
        for (int k = 0; k < 32; ++k) {
          const float q = d == 0 ? 0 : std::round(x[k] / d);
          out[i + 2 + static_cast<size_t>(k)] = static_cast<std::byte>(static_cast<int8_t>(q));
        }
      }
      return;
    }
    case GgmlType::Q4_0: {
      // Blocks of 32 as ggml's reference quantizer writes them: an f16 scale d = m / -8 (m the
      // value of largest magnitude), then 16 bytes holding x[j] / d + 8 (low nibble) and
      // x[j + 16] / d + 8 (high nibble), clamped to 0..15.
      for (size_t i = 0; i + 18 <= out.size(); i += 18) {
        float x[32];
        float m = 0;
        for (float& v : x) {
          v = next();
          if (std::fabs(v) > std::fabs(m)) m = v;
        }
        const float d = m / -8.0F;
        const float id = d == 0 ? 0 : 1.0F / d;
        const uint16_t dh = float_to_half(d);
        std::memcpy(out.data() + i, &dh, 2);
        auto nibble = [&](float v) { return std::min(15, static_cast<int>(v * id + 8.5F)); };
        for (size_t j = 0; j < 16; ++j) {
          out[i + 2 + j] = static_cast<std::byte>(nibble(x[j]) | (nibble(x[j + 16]) << 4));
        }
      }
      return;
    }
    default:
      return;  // validate() admits no other weight types
  }
}

// ---- tensor plans -------------------------------------------------------------------------

enum class Init {
  kWeight,   // matrix of the model's weight type, uniform ±scale
  kOnes,     // F32 norm weights ≈ 1
  kSmall,    // F32 small values (biases, conv kernels)
  kNegative, // F32 in [-2, -0.5] (gated delta net decay A = -exp(A_log))
};

struct TensorPlan {
  std::string name;
  std::vector<uint64_t> ne;
  Init init;
};

class Planner {
 public:
  explicit Planner(const SynthSpec& s, uint64_t n_vocab) : s_(s), n_vocab_(n_vocab) {}

  std::vector<TensorPlan> plan() {
    add("token_embd.weight", {s_.n_embd, n_vocab_}, Init::kWeight);
    add("output_norm.weight", {s_.n_embd}, Init::kOnes);
    if (!s_.tied_output) add("output.weight", {s_.n_embd, n_vocab_}, Init::kWeight);
    for (uint32_t il = 0; il < s_.n_layer; ++il) {
      if (s_.arch == "llama") llama_layer(il);
      if (s_.arch == "qwen3") qwen3_layer(il);
      if (s_.arch == "qwen35") qwen35_layer(il);
      if (s_.arch == "gemma3") gemma3_layer(il);
    }
    return std::move(plans_);
  }

 private:
  void add(std::string name, std::vector<uint64_t> ne, Init init) {
    plans_.push_back({std::move(name), std::move(ne), init});
  }
  std::string blk(uint32_t il, std::string_view what) const { return fmt::format("blk.{}.{}", il, what); }

  void attention(uint32_t il, uint64_t q_rows) {
    const uint64_t hd = s_.head_dim;
    add(blk(il, "attn_q.weight"), {s_.n_embd, q_rows}, Init::kWeight);
    add(blk(il, "attn_k.weight"), {s_.n_embd, hd * s_.n_head_kv}, Init::kWeight);
    add(blk(il, "attn_v.weight"), {s_.n_embd, hd * s_.n_head_kv}, Init::kWeight);
    add(blk(il, "attn_output.weight"), {hd * s_.n_head, s_.n_embd}, Init::kWeight);
  }
  void ffn(uint32_t il) {
    add(blk(il, "ffn_gate.weight"), {s_.n_embd, s_.n_ff}, Init::kWeight);
    add(blk(il, "ffn_up.weight"), {s_.n_embd, s_.n_ff}, Init::kWeight);
    add(blk(il, "ffn_down.weight"), {s_.n_ff, s_.n_embd}, Init::kWeight);
  }
  void qk_norm(uint32_t il) {
    add(blk(il, "attn_q_norm.weight"), {s_.head_dim}, Init::kOnes);
    add(blk(il, "attn_k_norm.weight"), {s_.head_dim}, Init::kOnes);
  }

  void llama_layer(uint32_t il) {
    add(blk(il, "attn_norm.weight"), {s_.n_embd}, Init::kOnes);
    attention(il, uint64_t{s_.head_dim} * s_.n_head);
    add(blk(il, "ffn_norm.weight"), {s_.n_embd}, Init::kOnes);
    ffn(il);
  }
  void qwen3_layer(uint32_t il) {
    llama_layer(il);
    qk_norm(il);
  }
  void gemma3_layer(uint32_t il) {
    add(blk(il, "attn_norm.weight"), {s_.n_embd}, Init::kOnes);
    attention(il, uint64_t{s_.head_dim} * s_.n_head);
    qk_norm(il);
    add(blk(il, "post_attention_norm.weight"), {s_.n_embd}, Init::kOnes);
    add(blk(il, "ffn_norm.weight"), {s_.n_embd}, Init::kOnes);
    ffn(il);
    add(blk(il, "post_ffw_norm.weight"), {s_.n_embd}, Init::kOnes);
  }
  void qwen35_layer(uint32_t il) {
    add(blk(il, "attn_norm.weight"), {s_.n_embd}, Init::kOnes);
    add(blk(il, "post_attention_norm.weight"), {s_.n_embd}, Init::kOnes);
    ffn(il);
    if ((il + 1) % s_.interval == 0) {
      // Full attention: Q carries the output gate, interleaved per head (2 × head_dim rows).
      attention(il, 2ULL * s_.head_dim * s_.n_head);
      qk_norm(il);
      return;
    }
    const uint64_t key_dim = uint64_t{s_.ssm_state} * s_.ssm_groups;
    const uint64_t value_dim = uint64_t{s_.ssm_state} * s_.ssm_dt_rank;
    const uint64_t conv_dim = 2 * key_dim + value_dim;
    add(blk(il, "attn_qkv.weight"), {s_.n_embd, conv_dim}, Init::kWeight);
    add(blk(il, "attn_gate.weight"), {s_.n_embd, value_dim}, Init::kWeight);
    add(blk(il, "ssm_conv1d.weight"), {s_.ssm_conv_kernel, conv_dim}, Init::kSmall);
    add(blk(il, "ssm_dt.bias"), {s_.ssm_dt_rank}, Init::kSmall);
    add(blk(il, "ssm_a"), {s_.ssm_dt_rank}, Init::kNegative);
    add(blk(il, "ssm_beta.weight"), {s_.n_embd, s_.ssm_dt_rank}, Init::kWeight);
    add(blk(il, "ssm_alpha.weight"), {s_.n_embd, s_.ssm_dt_rank}, Init::kWeight);
    add(blk(il, "ssm_norm.weight"), {s_.ssm_state}, Init::kOnes);
    add(blk(il, "ssm_out.weight"), {value_dim, s_.n_embd}, Init::kWeight);
  }

  const SynthSpec& s_;
  uint64_t n_vocab_;
  std::vector<TensorPlan> plans_;
};

uint32_t file_type_of(GgmlType t) {
  switch (t) {
    case GgmlType::F32: return 0;
    case GgmlType::F16: return 1;
    case GgmlType::Q4_0: return 2;
    case GgmlType::Q8_0: return 7;
    case GgmlType::BF16: return 32;
    default: return 1;
  }
}

Status add_metadata(Writer& w, const SynthSpec& s) {
  const std::string a = s.arch;
  auto key = [&a](std::string_view k) { return a + "." + std::string(k); };
  KV_TRY(w.add_string("general.architecture", a));
  KV_TRY(w.add_string("general.name", s.name.empty() ? "kvgate synthetic " + a : s.name));
  KV_TRY(w.add_u32("general.file_type", file_type_of(s.weight_type)));
  KV_TRY(w.add_u32(key("context_length"), s.ctx_train));
  KV_TRY(w.add_u32(key("embedding_length"), s.n_embd));
  KV_TRY(w.add_u32(key("block_count"), s.n_layer));
  KV_TRY(w.add_u32(key("feed_forward_length"), s.n_ff));
  KV_TRY(w.add_u32(key("attention.head_count"), s.n_head));
  KV_TRY(w.add_u32(key("attention.head_count_kv"), s.n_head_kv));
  KV_TRY(w.add_u32(key("attention.key_length"), s.head_dim));
  KV_TRY(w.add_u32(key("attention.value_length"), s.head_dim));
  KV_TRY(w.add_f32(key("attention.layer_norm_rms_epsilon"), 1e-6F));
  KV_TRY(w.add_f32(key("rope.freq_base"), s.rope_freq_base));
  if (a == "qwen35") {
    const uint32_t n_rot = s.rope_dim != 0 ? s.rope_dim : s.head_dim / 4;
    const uint32_t half = n_rot / 2;
    const uint32_t s0 = (half + 2) / 3;
    const int32_t sections[4] = {static_cast<int32_t>(s0), static_cast<int32_t>(s0),
                                 static_cast<int32_t>(half - 2 * s0), 0};
    KV_TRY(w.add_u32(key("rope.dimension_count"), n_rot));
    KV_TRY(w.add_i32_array(key("rope.dimension_sections"), sections));
    KV_TRY(w.add_u32(key("full_attention_interval"), s.interval));
    KV_TRY(w.add_u32(key("ssm.conv_kernel"), s.ssm_conv_kernel));
    KV_TRY(w.add_u32(key("ssm.state_size"), s.ssm_state));
    KV_TRY(w.add_u32(key("ssm.group_count"), s.ssm_groups));
    KV_TRY(w.add_u32(key("ssm.time_step_rank"), s.ssm_dt_rank));
    KV_TRY(w.add_u32(key("ssm.inner_size"), s.ssm_state * s.ssm_dt_rank));
  } else {
    KV_TRY(w.add_u32(key("rope.dimension_count"), s.head_dim));
  }
  if (a == "gemma3") {
    KV_TRY(w.add_u32(key("attention.sliding_window"), s.swa_window));
    KV_TRY(w.add_u32(key("attention.sliding_window_pattern"), s.swa_pattern));
    KV_TRY(w.add_f32(key("rope.freq_base_swa"), 10000.0F));
  }
  return {};
}

TensorFill make_fill(const TensorPlan& p, const SynthSpec& s, GgmlType type) {
  const uint64_t seed = hash_name(p.name, s.seed);
  // Uniform ±sqrt(3)·σ with σ = 1/sqrt(fan-in): activations keep their scale layer to layer.
  const float fan_in = static_cast<float>(p.ne[0]);
  const float scale = std::sqrt(3.0F / std::max(fan_in, 1.0F));
  return [seed, scale, init = p.init, type](std::span<std::byte> out) {
    Uniform u(seed, 0, 1);
    std::function<float()> next;
    switch (init) {
      case Init::kWeight: next = [&u, scale] { return (u.next() * 2 - 1) * scale; }; break;
      case Init::kOnes: next = [&u] { return 1.0F + (u.next() - 0.5F) * 0.1F; }; break;
      case Init::kSmall: next = [&u] { return (u.next() - 0.5F) * 0.2F; }; break;
      case Init::kNegative: next = [&u] { return -0.5F - 1.5F * u.next(); }; break;
    }
    store_values(type, out, next);
  };
}

}  // namespace

std::string_view builtin_chat_template() { return kQwen3StyleTemplate; }

std::vector<std::string_view> synth_architectures() { return {"llama", "qwen3", "qwen35", "gemma3"}; }

Result<SynthSpec> synth_defaults(std::string_view arch) {
  SynthSpec s;
  s.arch = std::string(arch);
  if (arch == "llama" || arch == "qwen3") return s;
  if (arch == "qwen35") {
    s.n_layer = 8;       // layers 3 and 7 hold KV; 6 gated-delta-net layers
    s.head_dim = 64;
    s.rope_dim = 16;
    return s;
  }
  if (arch == "gemma3") {
    s.n_layer = 6;       // layers 0-4 sliding window, 5 full attention
    s.rope_freq_base = 1000000.0F;
    return s;
  }
  return Error(fmt::format("unknown architecture '{}' (synth writes: llama, qwen3, qwen35, gemma3)", arch));
}

const std::vector<SynthPreset>& synth_presets() {
  static const std::vector<SynthPreset> presets = [] {
    std::vector<SynthPreset> out;
    auto add = [&out](std::string_view name, std::string_view description, SynthSpec s) {
      out.push_back({name, description, std::move(s)});
    };
    {
      SynthSpec s = *synth_defaults("qwen3");
      s.name = "kvgate default (tiny qwen3)";
      add("default", "the built-in default model of `kvgate up`: tiny qwen3, 4 layers, GQA 4/2", s);
    }
    for (auto arch : synth_architectures()) {
      SynthSpec s = *synth_defaults(arch);
      add(arch == "llama" ? "tiny-llama" : arch == "qwen3" ? "tiny-qwen3" : arch == "qwen35" ? "tiny-qwen35" : "tiny-gemma3",
          "small random-weight model of this architecture (tens of MB)", s);
    }
    {
      // Qwen3-8B proportions at tiny scale: 36 layers, 32 heads / 8 KV heads, head_dim 128 → scaled.
      SynthSpec s = *synth_defaults("qwen3");
      s.n_layer = 12;
      s.n_embd = 256;
      s.n_head = 8;
      s.n_head_kv = 2;
      s.head_dim = 64;
      s.n_ff = 768;
      add("small-qwen3", "a larger dense qwen3 (12 layers, 256 wide) whose prefill slows visibly with context", s);
    }
    {
      // Qwen3.5-27B (and Qwen3.6-27B, same text model), from Qwen/Qwen3.5-27B's config.json:
      // 64 layers, full attention every 4th (24 heads / 4 KV heads × 256, output gate,
      // partial rotary 0.25 → 64 dims, rope theta 1e7), gated delta net 16 k-heads / 48
      // v-heads × 128 with conv kernel 4, FFN 17408, vocabulary 248320, untied output,
      // 262144 training context. The GGUFs published for it have these 64 blocks (no MTP block).
      SynthSpec s = *synth_defaults("qwen35");
      s.n_layer = 64;
      s.n_embd = 5120;
      s.n_head = 24;
      s.n_head_kv = 4;
      s.head_dim = 256;
      s.rope_dim = 64;
      s.rope_freq_base = 10000000.0F;
      s.n_ff = 17408;
      s.ctx_train = 262144;
      s.ssm_state = 128;
      s.ssm_groups = 16;
      s.ssm_dt_rank = 48;
      s.n_vocab = 248320;
      s.keep_vocab_size = true;
      s.tied_output = false;
      s.metadata_only = true;
      s.name = "Qwen3.5-27B shape";
      add("qwen35-27b", "metadata-only Qwen3.5/3.6-27B shape (64 layers, 16 with KV; vocabulary 248320) for planning",
          s);
    }
    {
      SynthSpec s = *synth_defaults("qwen3");
      s.n_layer = 48;
      s.n_embd = 2048;
      s.n_head = 32;
      s.n_head_kv = 4;
      s.head_dim = 128;
      s.n_ff = 6144;
      s.ctx_train = 262144;
      s.metadata_only = true;
      s.name = "Qwen3-30B-class dense shape";
      add("qwen3-48l", "metadata-only 48-layer × 4 KV heads × 128 shape (the seed report's model)", s);
    }
    {
      SynthSpec s = *synth_defaults("gemma3");
      s.n_layer = 62;
      s.n_embd = 5376;
      s.n_head = 32;
      s.n_head_kv = 16;
      s.head_dim = 128;
      s.n_ff = 21504;
      s.swa_window = 1024;
      s.ctx_train = 131072;
      s.metadata_only = true;
      s.name = "Gemma-3-27B shape";
      add("gemma3-27b", "metadata-only Gemma 3 27B shape (62 layers, 52 sliding-window)", s);
    }
    return out;
  }();
  return presets;
}

const SynthPreset* find_synth_preset(std::string_view name) {
  for (const auto& p : synth_presets()) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

Status validate(const SynthSpec& s) {
  auto fail = [](std::string msg) { return Status(Error(std::move(msg))); };
  bool known = false;
  for (auto a : synth_architectures()) known = known || a == s.arch;
  if (!known) return fail(fmt::format("unknown architecture '{}' (synth writes: llama, qwen3, qwen35, gemma3)", s.arch));
  if (s.n_layer == 0 || s.n_layer > 512) return fail(fmt::format("--layers {} must be 1 to 512", s.n_layer));
  if (s.n_embd == 0 || s.n_head == 0 || s.n_head_kv == 0 || s.head_dim == 0 || s.n_ff == 0 || s.ctx_train == 0) {
    return fail("--embd, --heads, --heads-kv, --head-dim, --ff and --ctx-train must all be at least 1");
  }
  if (s.n_head % s.n_head_kv != 0) {
    return fail(fmt::format("--heads {} must be a multiple of --heads-kv {}", s.n_head, s.n_head_kv));
  }
  if (s.head_dim % 2 != 0) return fail(fmt::format("--head-dim {} must be even (rotary embedding)", s.head_dim));
  if (s.weight_type != GgmlType::F32 && s.weight_type != GgmlType::F16 && s.weight_type != GgmlType::BF16 &&
      s.weight_type != GgmlType::Q8_0 && s.weight_type != GgmlType::Q4_0) {
    return fail(fmt::format("--type {} is not supported for random weights (f32, f16, bf16, q8_0, q4_0)",
                            ggml_type_name(s.weight_type)));
  }
  std::vector<std::pair<std::string, uint64_t>> rows = {
      {"--embd", s.n_embd}, {"--ff", s.n_ff}, {"--heads × --head-dim", uint64_t{s.n_head} * s.head_dim}};
  if (s.arch == "qwen35") {
    if (s.interval == 0 || s.interval > s.n_layer) {
      return fail(fmt::format("--interval {} must be 1 to --layers {} so that at least one layer has full attention",
                              s.interval, s.n_layer));
    }
    const uint32_t n_rot = s.rope_dim != 0 ? s.rope_dim : s.head_dim / 4;
    if (n_rot < 6 || n_rot % 2 != 0 || n_rot > s.head_dim) {
      return fail(fmt::format("--rope-dim {} must be even, at least 6 and at most --head-dim {}", n_rot, s.head_dim));
    }
    if (s.ssm_groups == 0 || s.ssm_dt_rank == 0 || s.ssm_state == 0 || s.ssm_conv_kernel < 2) {
      return fail("--ssm-groups, --ssm-heads and --ssm-state must be at least 1, --ssm-conv at least 2");
    }
    if (s.ssm_dt_rank % s.ssm_groups != 0) {
      return fail(fmt::format("--ssm-heads {} (v heads) must be a multiple of --ssm-groups {} (k heads)", s.ssm_dt_rank,
                              s.ssm_groups));
    }
    rows.push_back({"--ssm-state × --ssm-heads", uint64_t{s.ssm_state} * s.ssm_dt_rank});
  }
  if (s.arch == "gemma3") {
    if (s.swa_window == 0) return fail("--swa-window must be at least 1");
    if (s.swa_pattern == 0 || s.swa_pattern > s.n_layer) {
      return fail(fmt::format("--swa-pattern {} must be 1 to --layers {} so that at least one layer is dense",
                              s.swa_pattern, s.n_layer));
    }
  }
  if (s.weight_type == GgmlType::Q8_0 || s.weight_type == GgmlType::Q4_0) {
    for (const auto& [what, n] : rows) {
      if (n % 32 != 0) {
        return fail(fmt::format("{} = {} must be a multiple of 32 for {} weights", what, n,
                                ggml_type_name(s.weight_type)));
      }
    }
  }
  return {};
}

Result<SynthResult> synthesize(const SynthSpec& spec, const File* vocab, const std::filesystem::path& out) {
  KV_TRY(validate(spec));
  Writer w;
  KV_TRY(add_metadata(w, spec));
  uint64_t n_vocab = spec.n_vocab;
  if (vocab != nullptr) {
    const Value* tokens = vocab->find("tokenizer.ggml.tokens");
    if (tokens == nullptr || tokens->element_type() != ValueType::STRING || tokens->size() == 0) {
      return Error("the vocabulary file has no tokenizer.ggml.tokens string array; use a tokenizer GGUF such as "
                   "ggml-vocab-qwen2.gguf");
    }
    n_vocab = tokens->size();
    const std::string_view chat_template =
        spec.chat_template ? std::string_view(*spec.chat_template) : builtin_chat_template();
    for (const auto& kv : vocab->metadata()) {
      if (kv.key.substr(0, 10) != "tokenizer.") continue;
      if (kv.key == "tokenizer.chat_template" && !chat_template.empty()) continue;
      KV_TRY(w.add_value(kv.key, kv.value));
    }
    if (!chat_template.empty()) KV_TRY(w.add_string("tokenizer.chat_template", chat_template));
  }
  if (spec.metadata_only) KV_TRY(w.add_bool(kMetadataOnlyKey, true));

  SynthResult result;
  for (const TensorPlan& p : Planner(spec, n_vocab).plan()) {
    const GgmlType type = p.init == Init::kWeight ? spec.weight_type : GgmlType::F32;
    uint64_t n = 1;
    for (uint64_t d : p.ne) n *= d;
    result.n_params += n;
    KV_TRY(w.add_tensor(p.name, type, p.ne, spec.metadata_only ? TensorFill() : make_fill(p, spec, type)));
  }
  KV_TRY(w.write(out, spec.metadata_only));
  result.tensor_count = w.tensor_count();
  result.tensor_bytes = w.tensor_bytes();
  std::error_code ec;
  result.file_size = std::filesystem::file_size(out, ec);
  return result;
}

}  // namespace kvgate::gguf
