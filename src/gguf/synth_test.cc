#include "gguf/synth.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>

#include <gtest/gtest.h>
#include <unistd.h>

#include "gguf/writer.h"

namespace kvgate::gguf {
namespace {

// A minimal tokenizer-only file, as the release's ggml-vocab-*.gguf are.
std::filesystem::path tiny_vocab() {
  const auto path =
      std::filesystem::temp_directory_path() / ("kvgate_vocab_" + std::to_string(::getpid()) + ".gguf");
  Writer w;
  EXPECT_TRUE(w.add_string("general.architecture", "qwen2").ok());
  EXPECT_TRUE(w.add_string("tokenizer.ggml.model", "gpt2").ok());
  const std::string tokens[] = {"a", "b", "c", "<|im_start|>", "<|im_end|>"};
  EXPECT_TRUE(w.add_string_array("tokenizer.ggml.tokens", tokens).ok());
  EXPECT_TRUE(w.add_string("tokenizer.chat_template", "{{ vocab template }}").ok());
  EXPECT_TRUE(w.write(path).ok());
  return path;
}

TEST(SynthTest, EveryArchitectureHasAValidDefault) {
  for (auto arch : synth_architectures()) {
    auto spec = synth_defaults(arch);
    ASSERT_TRUE(spec.ok()) << arch;
    EXPECT_TRUE(validate(*spec).ok()) << arch;
  }
  EXPECT_FALSE(synth_defaults("mamba").ok());
}

TEST(SynthTest, ValidationNamesTheFlag) {
  auto s = *synth_defaults("qwen3");
  s.n_head = 6;
  s.n_head_kv = 4;
  auto v = validate(s);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.error().message().find("--heads 6 must be a multiple of --heads-kv 4"), std::string::npos);
  auto q = *synth_defaults("qwen35");
  q.ssm_dt_rank = 3;
  q.ssm_groups = 2;
  EXPECT_NE(validate(q).error().message().find("--ssm-heads"), std::string::npos);
  auto g = *synth_defaults("gemma3");
  g.swa_pattern = 99;
  EXPECT_NE(validate(g).error().message().find("--swa-pattern"), std::string::npos);
  auto t = *synth_defaults("llama");
  t.weight_type = GgmlType::Q8_0;
  t.n_ff = 100;
  EXPECT_NE(validate(t).error().message().find("multiple of 32"), std::string::npos);
}

TEST(SynthTest, WritesTemplateAndShapes) {
  const auto vocab_path = tiny_vocab();
  auto vocab = File::open(vocab_path);
  ASSERT_TRUE(vocab.ok());
  const auto out =
      std::filesystem::temp_directory_path() / ("kvgate_synth_" + std::to_string(::getpid()) + ".gguf");
  auto spec = *synth_defaults("qwen35");
  spec.weight_type = GgmlType::F32;
  ASSERT_TRUE(synthesize(spec, &*vocab, out).ok());
  auto f = File::open(out);
  ASSERT_TRUE(f.ok()) << f.error().message();
  EXPECT_EQ(f->get_string("tokenizer.chat_template"), builtin_chat_template());
  EXPECT_NE(builtin_chat_template().find("<tool_call>"), std::string::npos);
  // Layer 3 holds attention (interval 4), layer 0 the gated delta net.
  EXPECT_NE(f->find_tensor("blk.3.attn_q.weight"), nullptr);
  EXPECT_EQ(f->find_tensor("blk.0.attn_q.weight"), nullptr);
  EXPECT_NE(f->find_tensor("blk.0.ssm_a"), nullptr);
  EXPECT_EQ(f->find_tensor("blk.3.attn_q.weight")->ne[1], 2ULL * spec.head_dim * spec.n_head);
  EXPECT_EQ(f->find_tensor("token_embd.weight")->ne[1], 5U);  // the vocabulary's size

  spec.chat_template = "";                // keep the vocabulary's own
  const auto out2 = out.string() + ".2";  // `out` is still mapped (Windows cannot replace it)
  ASSERT_TRUE(synthesize(spec, &*vocab, out2).ok());
  EXPECT_EQ(File::open(out2)->get_string("tokenizer.chat_template"), "{{ vocab template }}");
  f = Error("closed");  // unmapped, so it can be removed everywhere
  vocab = Error("closed");
  for (const auto& p : {out, std::filesystem::path(out2), vocab_path}) std::filesystem::remove(p);
}

TEST(SynthTest, SameSeedSameBytes) {
  const auto vocab_path = tiny_vocab();
  auto vocab = File::open(vocab_path);
  const auto a =
      std::filesystem::temp_directory_path() / ("kvgate_seed_a_" + std::to_string(::getpid()) + ".gguf");
  const auto b =
      std::filesystem::temp_directory_path() / ("kvgate_seed_b_" + std::to_string(::getpid()) + ".gguf");
  auto spec = *synth_defaults("llama");
  ASSERT_TRUE(synthesize(spec, &*vocab, a).ok());
  ASSERT_TRUE(synthesize(spec, &*vocab, b).ok());
  auto fa = File::open(a);
  auto fb = File::open(b);
  const auto* ta = fa->find_tensor("blk.0.attn_q.weight");
  const auto* tb = fb->find_tensor("blk.0.attn_q.weight");
  ASSERT_TRUE(ta && tb);
  auto da = fa->tensor_data(*ta);
  auto db = fb->tensor_data(*tb);
  EXPECT_TRUE(std::equal(da.begin(), da.end(), db.begin(), db.end()));
  spec.seed = 2;
  const auto c = b.string() + ".seed2";  // `b` is still mapped (Windows cannot replace it)
  ASSERT_TRUE(synthesize(spec, &*vocab, c).ok());
  auto fc = File::open(c);
  auto dc = fc->tensor_data(*fc->find_tensor("blk.0.attn_q.weight"));
  EXPECT_FALSE(std::equal(da.begin(), da.end(), dc.begin(), dc.end()));
  for (auto* file : {&fa, &fb, &fc, &vocab}) *file = Error("closed");  // unmapped: removable everywhere
  for (const auto& p : {a, b, std::filesystem::path(c), vocab_path}) std::filesystem::remove(p);
}

// IEEE half to float (normal numbers and zero; the scales are never subnormal here).
float half_to_float(uint16_t h) {
  const uint32_t sign = (h & 0x8000U) << 16;
  const uint32_t exp = (h >> 10) & 0x1FU;
  const uint32_t mant = h & 0x3FFU;
  if (exp == 0) return std::bit_cast<float>(sign);
  return std::bit_cast<float>(sign | ((exp + 112U) << 23) | (mant << 13));
}

// q4_0 blocks decode, as ggml does ((nibble - 8) × d), to values inside the weights' range
// ±sqrt(3 / fan-in), and use more than a few of the 16 levels.
TEST(SynthTest, Q4_0BlocksDecodeToTheWeightRange) {
  const auto vocab_path = tiny_vocab();
  auto vocab = File::open(vocab_path);
  const auto out =
      std::filesystem::temp_directory_path() / ("kvgate_q4_" + std::to_string(::getpid()) + ".gguf");
  auto spec = *synth_defaults("qwen3");
  spec.weight_type = GgmlType::Q4_0;
  ASSERT_TRUE(synthesize(spec, &*vocab, out).ok());
  auto f = File::open(out);
  ASSERT_TRUE(f.ok()) << f.error().message();
  EXPECT_EQ(f->get_uint("general.file_type"), 2U);  // LLAMA_FTYPE_MOSTLY_Q4_0
  const auto* t = f->find_tensor("blk.0.attn_q.weight");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->type, GgmlType::Q4_0);
  const auto data = f->tensor_data(*t);
  ASSERT_EQ(data.size() % 18, 0U);
  const float limit = std::sqrt(3.0F / static_cast<float>(t->ne[0])) * 1.01F;
  std::set<int> levels;
  for (size_t b = 0; b < data.size(); b += 18) {
    uint16_t dh = 0;
    std::memcpy(&dh, data.data() + b, 2);
    const float d = half_to_float(dh);
    for (size_t j = 0; j < 16; ++j) {
      const auto byte = static_cast<uint8_t>(data[b + 2 + j]);
      for (int q : {byte & 0x0F, byte >> 4}) {
        levels.insert(q);
        EXPECT_LE(std::fabs(static_cast<float>(q - 8) * d), limit) << "block at " << b;
      }
    }
  }
  EXPECT_GE(levels.size(), 12U);
  std::filesystem::remove(out);
  std::filesystem::remove(vocab_path);
}

}  // namespace
}  // namespace kvgate::gguf
