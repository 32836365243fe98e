// Synthetic GGUF models: real architectures, random weights.
//
// synthesize() writes a file the pinned llama-server loads and serves: the metadata keys
// and tensors (names, shapes, F32 where the engine requires it) of the chosen architecture,
// random weights drawn from a seeded generator, and the tokenizer copied from a
// tokenizer-only GGUF (the release's models/ggml-vocab-*.gguf). The output is meaningless
// text, produced at the speed of a real model of that shape; that is what tests, planning
// checks and benchmarks need.
//
// Architectures: llama, qwen3 (dense GQA), qwen35 (hybrid: gated-delta-net layers with a
// full-attention layer every `interval`), gemma3 (sliding window every layer but each
// `swa_pattern`-th). With metadata_only, no tensor data is written: the file has the header
// of the full model (any size) for planning tests.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/file.h"
#include "gguf/ggml_type.h"
#include "util/result.h"

namespace kvgate::gguf {

struct SynthSpec {
  std::string arch = "qwen3";
  std::string name;             // general.name; default "kvgate synthetic <arch>"
  uint32_t n_layer = 4;
  uint32_t n_embd = 128;
  uint32_t n_head = 4;
  uint32_t n_head_kv = 2;
  uint32_t head_dim = 32;       // attention.key_length = value_length
  uint32_t n_ff = 256;
  uint32_t ctx_train = 131072;
  float rope_freq_base = 1000000.0F;
  // qwen35: full attention every `interval` layers; gated delta net dimensions.
  uint32_t interval = 4;
  uint32_t rope_dim = 0;        // qwen35 n_rot (0: head_dim / 4)
  uint32_t ssm_conv_kernel = 4;
  uint32_t ssm_state = 32;      // head dim of the linear-attention k and v
  uint32_t ssm_groups = 2;      // k heads
  uint32_t ssm_dt_rank = 4;     // v heads; inner size = ssm_state * ssm_dt_rank
  // gemma3: sliding window and the period of dense layers (every swa_pattern-th is dense).
  uint32_t swa_window = 256;
  uint32_t swa_pattern = 6;
  // Weights of matrix multiplications and the token embedding; 1-D tensors are always F32.
  GgmlType weight_type = GgmlType::F16;
  uint64_t seed = 1;
  bool metadata_only = false;
  // Chat template written as tokenizer.chat_template: the built-in qwen3-style template
  // (tools, <think> reasoning dropped before the last user turn, enable_thinking) unless
  // another text is given; "" keeps the vocabulary file's own template.
  std::optional<std::string> chat_template;
  // Token count used when no vocabulary file is given.
  uint32_t n_vocab = 151936;
  // Metadata-only shapes of real models: `kvgate synth` writes n_vocab embedding rows and no
  // tokenizer unless a vocabulary file is named (the release's qwen2 vocabulary would change
  // the embedding size).
  bool keep_vocab_size = false;
  // false: a separate output.weight (n_embd × n_vocab) as in models with untied embeddings.
  bool tied_output = true;
};

// Architectures synthesize() supports.
std::vector<std::string_view> synth_architectures();

// Sensible small defaults for an architecture (what `synth --arch X` writes).
Result<SynthSpec> synth_defaults(std::string_view arch);

struct SynthPreset {
  std::string_view name;
  std::string_view description;
  SynthSpec spec;
};
// Named presets: tiny models with realistic proportions, and metadata-only shapes of real
// models for planning.
const std::vector<SynthPreset>& synth_presets();
const SynthPreset* find_synth_preset(std::string_view name);

// Checks the dimensions against the architecture's rules (divisibility, block sizes, the
// engine's own asserts) and names the offending flag.
Status validate(const SynthSpec& spec);

struct SynthResult {
  uint64_t file_size = 0;
  uint64_t tensor_count = 0;
  uint64_t tensor_bytes = 0;
  uint64_t n_params = 0;
};

// The built-in chat template (see src/gguf/templates/qwen3-style.jinja).
std::string_view builtin_chat_template();

// Writes the model. `vocab` supplies the tokenizer.* keys (and so the vocabulary size).
// Without it the file has spec.n_vocab embedding rows and no tokenizer: readable, plannable,
// but not loadable by the engine.
Result<SynthResult> synthesize(const SynthSpec& spec, const File* vocab, const std::filesystem::path& out);

}  // namespace kvgate::gguf
