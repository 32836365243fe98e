// Weight recipes: the type and bytes of specific tensors under specific recipes, computed by
// hand from the block layouts (bytes per block / elements per block):
//   q3_K 110/256, q4_K 144/256, q5_K 176/256, q6_K 210/256, iq2_s 82/256, iq3_s 110/256,
//   q4_0 18/32, q5_0 22/32, q8_0 34/32, iq4_xs 136/256, f16 2/1, f32 4/1.
#include "plan/quant_recipe.h"

#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "gguf/synth.h"
#include "testing/test_models.h"

namespace kvgate::plan {
namespace {

using gguf::GgmlType;

// A tensor list with stable names (TensorIn holds a view).
class Tensors {
 public:
  void add(std::string name, std::vector<uint64_t> ne, GgmlType stored = GgmlType::F16) {
    names_.push_back(std::make_unique<std::string>(std::move(name)));
    TensorIn t;
    t.name = *names_.back();
    t.n_dims = static_cast<uint32_t>(ne.size());
    uint64_t n = 1;
    for (size_t i = 0; i < ne.size(); ++i) {
      t.ne[i] = ne[i];
      n *= ne[i];
    }
    t.stored = stored;
    t.stored_bytes = n * (stored == GgmlType::F32 ? 4 : 2);
    in_.push_back(t);
  }
  const std::vector<TensorIn>& in() const { return in_; }
  size_t index(std::string_view name) const {
    for (size_t i = 0; i < in_.size(); ++i) {
      if (in_[i].name == name) return i;
    }
    ADD_FAILURE() << "no tensor " << name;
    return 0;
  }

 private:
  std::vector<std::unique_ptr<std::string>> names_;
  std::vector<TensorIn> in_;
};

// 16 dense blocks, 256 wide, GQA 8/2 (n_gqa 4), vocabulary 1000, untied output.
Tensors dense16(bool with_output = true) {
  Tensors t;
  t.add("token_embd.weight", {256, 1000});
  if (with_output) t.add("output.weight", {256, 1000});
  t.add("output_norm.weight", {256}, GgmlType::F32);
  for (int il = 0; il < 16; ++il) {
    t.add(fmt::format("blk.{}.attn_norm.weight", il), {256}, GgmlType::F32);
    t.add(fmt::format("blk.{}.attn_q.weight", il), {256, 256});
    t.add(fmt::format("blk.{}.attn_v.weight", il), {256, 256});
    t.add(fmt::format("blk.{}.attn_output.weight", il), {256, 256});
    t.add(fmt::format("blk.{}.ffn_down.weight", il), {512, 256});
  }
  return t;
}

const RecipeModel kDense{.arch = "qwen3", .n_layer_all = 16, .n_head = 8, .n_head_kv = 2, .n_expert = 0};

std::vector<TensorOut> lay_out(std::string_view recipe, const RecipeModel& model, const Tensors& t,
                               RecipeOptions options = {}) {
  const QuantRecipe* r = find_quant_recipe(recipe);
  EXPECT_NE(r, nullptr) << recipe;
  auto out = lay_out_weights(*r, model, t.in(), options);
  EXPECT_TRUE(out.ok()) << out.error().message();
  return *out;
}

TEST(QuantRecipe, NamesAndClasses) {
  EXPECT_NE(find_quant_recipe("q3_k_m"), nullptr);
  EXPECT_EQ(recipe_name(*find_quant_recipe("iq2_m")), "IQ2_M");
  EXPECT_EQ(find_quant_recipe("Q3_K_XL"), nullptr);
  EXPECT_GE(quant_recipe_names().size(), 30u);
  EXPECT_EQ(classify_tensor("blk.0.attn_qkv.weight"), TensorClass::kAttnV);
  EXPECT_EQ(classify_tensor("blk.0.attn_kv_b.weight"), TensorClass::kAttnV);
  EXPECT_EQ(classify_tensor("blk.3.ffn_down_exps.weight"), TensorClass::kFfnDown);
  EXPECT_EQ(classify_tensor("blk.3.ssm_out.weight"), TensorClass::kOther);
  EXPECT_FALSE(quantizer_retypes("blk.0.ssm_conv1d.weight", 2));
  EXPECT_FALSE(quantizer_retypes("blk.0.attn_q_norm.weight", 1));
  EXPECT_FALSE(quantizer_retypes("blk.0.ffn_gate_inp.weight", 2));
  EXPECT_FALSE(quantizer_retypes("blk.0.ssm_a", 2)) << "does not end in weight";
  EXPECT_TRUE(quantizer_retypes("blk.0.ssm_alpha.weight", 2));
}

TEST(QuantRecipe, Q3_K_M_OnADenseModel) {
  const Tensors t = dense16();
  const auto out = lay_out("Q3_K_M", kDense, t);
  auto at = [&](std::string_view name) { return out[t.index(name)]; };
  // output: q6_K, 1000 rows × 1 block × 210.
  EXPECT_EQ(at("output.weight").type, GgmlType::Q6_K);
  EXPECT_EQ(at("output.weight").bytes, 210000u);
  // An untied token_embd keeps the base: q3_K, 1000 × 110.
  EXPECT_EQ(at("token_embd.weight").type, GgmlType::Q3_K);
  EXPECT_EQ(at("token_embd.weight").bytes, 110000u);
  // attn_v: the first two q5_K (256 × 176), the rest q4_K (256 × 144).
  EXPECT_EQ(at("blk.1.attn_v.weight").bytes, 45056u);
  EXPECT_EQ(at("blk.2.attn_v.weight").type, GgmlType::Q4_K);
  EXPECT_EQ(at("blk.2.attn_v.weight").bytes, 36864u);
  // ffn_down: layers below 16/16 = 1 get q5_K (256 rows × 2 blocks × 176), the others q4_K.
  EXPECT_EQ(at("blk.0.ffn_down.weight").bytes, 90112u);
  EXPECT_EQ(at("blk.1.ffn_down.weight").type, GgmlType::Q4_K);
  EXPECT_EQ(at("blk.1.ffn_down.weight").bytes, 73728u);
  // attn_output q4_K; attn_q the base q3_K (256 × 110); norms keep their stored F32.
  EXPECT_EQ(at("blk.5.attn_output.weight").bytes, 36864u);
  EXPECT_EQ(at("blk.5.attn_q.weight").bytes, 28160u);
  EXPECT_EQ(at("blk.5.attn_norm.weight").type, GgmlType::F32);
  EXPECT_EQ(at("blk.5.attn_norm.weight").bytes, 1024u);
}

TEST(QuantRecipe, Q4_K_M_UsesMoreBitsPattern) {
  const Tensors t = dense16();
  const auto out = lay_out("Q4_K_M", kDense, t);
  // use_more_bits(i, 16): i < 2, i ≥ 14, or (i − 2) % 3 == 2 → layers 0, 1, 4, 7, 10, 13, 14, 15.
  for (int il = 0; il < 16; ++il) {
    const bool more = il < 2 || il >= 14 || (il - 2) % 3 == 2;
    const auto v = out[t.index(fmt::format("blk.{}.attn_v.weight", il))];
    const auto down = out[t.index(fmt::format("blk.{}.ffn_down.weight", il))];
    EXPECT_EQ(v.bytes, more ? 53760u : 36864u) << il;      // 256 × 210 or 256 × 144
    EXPECT_EQ(down.bytes, more ? 107520u : 73728u) << il;  // 256 × 2 × 210 or 256 × 2 × 144
  }
}

TEST(QuantRecipe, IQ2_M_OnADenseModel) {
  const Tensors t = dense16();
  const auto out = lay_out("IQ2_M", kDense, t);
  auto at = [&](std::string_view name) { return out[t.index(name)]; };
  EXPECT_EQ(at("output.weight").bytes, 176000u);      // q5_K: 1000 × 176
  EXPECT_EQ(at("token_embd.weight").bytes, 110000u);  // iq3_s: 1000 × 110
  EXPECT_EQ(at("blk.9.attn_v.weight").bytes, 36864u) << "n_gqa 4: q4_K";
  EXPECT_EQ(at("blk.1.ffn_down.weight").bytes, 56320u) << "ordinal < 16/8: iq3_s, 256 × 2 × 110";
  EXPECT_EQ(at("blk.2.ffn_down.weight").bytes, 41984u) << "iq2_s, 256 × 2 × 82";
  EXPECT_EQ(at("blk.2.attn_output.weight").bytes, 28160u) << "iq3_s";
  EXPECT_EQ(at("blk.2.attn_q.weight").bytes, 20992u) << "the base iq2_s";
  // Without grouped heads (n_gqa 1) attn_v is iq3_s instead.
  RecipeModel mha = kDense;
  mha.n_head_kv = 8;
  EXPECT_EQ(lay_out("IQ2_M", mha, t)[t.index("blk.9.attn_v.weight")].type, GgmlType::IQ3_S);
}

TEST(QuantRecipe, TiedEmbeddingIsQuantizedLikeTheOutput) {
  const Tensors t = dense16(/*with_output=*/false);
  EXPECT_EQ(lay_out("Q3_K_M", kDense, t)[t.index("token_embd.weight")].bytes, 210000u);  // q6_K
  EXPECT_EQ(lay_out("Q8_0", kDense, t)[t.index("token_embd.weight")].bytes, 272000u);  // q8_0: 1000 × 8 × 34
}

TEST(QuantRecipe, RowsThatDoNotDivideFallBack) {
  Tensors t;
  t.add("output.weight", {288, 10});
  t.add("blk.0.ffn_gate.weight", {288, 10});
  t.add("blk.0.ffn_up.weight", {100, 10});
  const auto q3 = lay_out("Q3_K_M", {.arch = "llama", .n_layer_all = 1, .n_head = 1, .n_head_kv = 1}, t);
  // output with a row that is no multiple of 256: q8_0, 9 blocks × 34 per row.
  EXPECT_EQ(q3[0].type, GgmlType::Q8_0);
  EXPECT_EQ(q3[0].bytes, 3060u);
  // q3_K → q4_0: 9 blocks × 18 per row.
  EXPECT_EQ(q3[1].type, GgmlType::Q4_0);
  EXPECT_TRUE(q3[1].fallback);
  EXPECT_EQ(q3[1].bytes, 1620u);
  // 100 is no multiple of 32 either: f16, 200 bytes per row.
  EXPECT_EQ(q3[2].type, GgmlType::F16);
  EXPECT_EQ(q3[2].bytes, 2000u);
  // q4_K → q5_0: 9 × 22 per row.
  const auto q4 = lay_out("Q4_K_M", {.arch = "llama", .n_layer_all = 1, .n_head = 1, .n_head_kv = 1}, t);
  EXPECT_EQ(q4[1].type, GgmlType::Q5_0);
  EXPECT_EQ(q4[1].bytes, 1980u);
}

TEST(QuantRecipe, EightExpertsAndSeventyB) {
  Tensors t;
  t.add("blk.0.attn_k.weight", {256, 64});
  t.add("blk.0.attn_v.weight", {256, 64});
  t.add("blk.0.ffn_down_exps.weight", {512, 256, 8});
  const auto moe =
      lay_out("Q4_K_M", {.arch = "llama", .n_layer_all = 32, .n_head = 32, .n_head_kv = 8, .n_expert = 8}, t);
  EXPECT_EQ(moe[0].bytes, 17408u) << "q8_0: 64 rows × 8 blocks × 34";
  EXPECT_EQ(moe[1].bytes, 17408u);
  // Layer 0 of 32 uses more bits: q6_K, 256 × 8 rows × 2 blocks × 210.
  EXPECT_EQ(moe[2].bytes, 860160u);

  // A llama with 80 blocks and grouped KV heads: attn_v past the first two is q5_K, not q4_K.
  Tensors big;
  for (int il = 0; il < 80; ++il) big.add(fmt::format("blk.{}.attn_v.weight", il), {256, 64});
  const auto llama70 =
      lay_out("Q3_K_M", {.arch = "llama", .n_layer_all = 80, .n_head = 64, .n_head_kv = 8}, big);
  EXPECT_EQ(llama70[big.index("blk.40.attn_v.weight")].type, GgmlType::Q5_K);
  const auto other =
      lay_out("Q3_K_M", {.arch = "qwen3", .n_layer_all = 80, .n_head = 64, .n_head_kv = 8}, big);
  EXPECT_EQ(other[big.index("blk.40.attn_v.weight")].type, GgmlType::Q4_K);
}

TEST(QuantRecipe, ImatrixMatters) {
  const Tensors t = dense16();
  // Q4_0 with an importance matrix: ffn_down of the first 16/8 = 2 layers q4_1 (256 × 16 × 20).
  EXPECT_EQ(lay_out("Q4_0", kDense, t)[t.index("blk.1.ffn_down.weight")].bytes, 81920u);
  EXPECT_EQ(lay_out("Q4_0", kDense, t, {.imatrix = false})[t.index("blk.1.ffn_down.weight")].bytes, 73728u);
  // IQ4_XS without one: q5_K in the first 2 layers (256 × 2 × 176); with one the base (× 136).
  EXPECT_EQ(lay_out("IQ4_XS", kDense, t, {.imatrix = false})[t.index("blk.0.ffn_down.weight")].bytes, 90112u);
  EXPECT_EQ(lay_out("IQ4_XS", kDense, t)[t.index("blk.0.ffn_down.weight")].bytes, 69632u);
}

// The Qwen3.5-27B shape (synth preset qwen35-27b): 64 blocks, gated-delta-net layers with a
// fused attn_qkv (5120 → 2·16·128 + 48·128 = 10240) that counts as attention V.
TEST(QuantRecipe, Qwen35_27B_Q3_K_M) {
  const QuantRecipe* q3 = find_quant_recipe("Q3_K_M");
  auto m = testing::describe_synth(gguf::find_synth_preset("qwen35-27b")->spec, {.weights = q3});
  ASSERT_TRUE(m.ok()) << m.error().message();
  EXPECT_EQ(m->weights_recipe, "Q3_K_M");
  EXPECT_EQ(m->weights_fallbacks, 0u);
  // token_embd q3_K: 248320 rows × 20 blocks × 110; it stays on the host.
  EXPECT_EQ(m->token_embd_bytes, 546304000u);
  // output q6_K: 248320 × 20 × 210, plus output_norm (5120 F32).
  EXPECT_EQ(m->output_bytes, 1042944000u + 20480u);
  // Block 0 (gated delta net), by hand:
  //   attn_qkv q5_K (first attention-V-like)  10240 × 20 × 176 = 36,044,800
  //   attn_gate q3_K                           6144 × 20 × 110 = 13,516,800
  //   ssm_out q3_K (6144 → 5120)               5120 × 24 × 110 = 13,516,800
  //   ssm_alpha, ssm_beta q3_K                  2 × 48 × 20 × 110 = 211,200
  //   ffn_gate, ffn_up q3_K                     2 × 17408 × 20 × 110 = 76,595,200
  //   ffn_down q5_K (layer < 64/16)            5120 × 68 × 176 = 61,276,160
  //   ssm_conv1d F32 (4 × 10240)               163,840
  //   norms F32 (2 × 5120 + 128), ssm_dt, ssm_a (48 each)  41,472 + 384
  EXPECT_EQ(m->layers[0].weight_bytes,
            36044800u + 13516800u + 13516800u + 211200u + 76595200u + 61276160u + 163840u + 41472u + 384u);
  // Block 3 (full attention): attn_q q3_K 12288 × 20 × 110, attn_k q3_K 1024 × 20 × 110,
  // attn_v q4_K 1024 × 20 × 144, attn_output q4_K (6144 → 5120) 5120 × 24 × 144,
  // ffn_gate/up q3_K, ffn_down q5_K (layer 3 < 4), norms 2 × 5120 + 2 × 256 F32.
  EXPECT_EQ(m->layers[3].weight_bytes,
            27033600u + 2252800u + 2949120u + 17694720u + 76595200u + 61276160u + 43008u);
  // Block 4: ffn_down q4_K (5120 × 68 × 144) instead.
  // Block 4: ffn_down q4_K (5120 × 68 × 144 = 50,135,040) and attn_qkv q4_K (10240 × 20 × 144 =
  // 29,491,200), so it is (61,276,160 − 50,135,040) + (36,044,800 − 29,491,200) smaller than block 0.
  EXPECT_EQ(m->layers[0].weight_bytes - m->layers[4].weight_bytes, 11141120u + 6553600u);
}

// synth writes q8_0 weights with 1-D tensors and convolution kernels F32: the Q8_0 recipe
// applied to the f16 file of the same shape gives exactly the q8_0 file's tensor bytes.
TEST(QuantRecipe, Q8_0RecipeEqualsTheQ8_0File) {
  for (const char* arch : {"llama", "qwen3", "qwen35", "gemma3"}) {
    gguf::SynthSpec f16 = *gguf::synth_defaults(arch);
    gguf::SynthSpec q8 = f16;
    q8.weight_type = GgmlType::Q8_0;
    auto file = testing::describe_synth(q8);
    auto planned = testing::describe_synth(f16, {.weights = find_quant_recipe("Q8_0")});
    ASSERT_TRUE(file.ok() && planned.ok()) << arch;
    EXPECT_EQ(planned->tensor_bytes, file->tensor_bytes) << arch;
    EXPECT_EQ(planned->token_embd_bytes, file->token_embd_bytes) << arch;
    for (size_t il = 0; il < file->layers.size(); ++il) {
      EXPECT_EQ(planned->layers[il].weight_bytes, file->layers[il].weight_bytes) << arch << " block " << il;
    }
  }
}

}  // namespace
}  // namespace kvgate::plan
