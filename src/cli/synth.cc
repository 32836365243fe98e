// kvgate synth: writes GGUF models with random weights (see gguf/synth.h).
//
//   kvgate synth --arch qwen35 --out m.gguf                 small model, default dimensions
//   kvgate synth --preset tiny-gemma3 --out m.gguf          a named preset
//   kvgate synth --preset qwen35-27b --out big.gguf         metadata-only real shape
//   kvgate synth --arch qwen3 --layers 8 --heads-kv 1 ...   any dimension
//   kvgate synth --default-model                            the built-in model of `kvgate up`
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "cli/args.h"
#include "cli/command.h"
#include "engine/pinned.h"
#include "gguf/synth.h"
#include "util/units.h"

namespace kvgate::cli {
namespace {

void print_presets() {
  for (const auto& p : gguf::synth_presets()) {
    fmt::print("  {:<14} {:<7} {}\n", p.name, p.spec.arch, p.description);
  }
}

}  // namespace

int run_synth(int argc, char** argv) {
  CLI::App app{"Write a GGUF model with random weights that llama-server loads and serves "
               "(llama, qwen3, qwen35 hybrid, gemma3 sliding-window).",
               "kvgate synth"};
  std::string arch;
  std::string preset;
  std::string out;
  std::string vocab;
  std::string type_name;
  std::string name;
  std::string ctx_train;
  std::string chat_template;
  bool metadata_only = false;
  bool list_presets = false;
  bool default_model = false;
  std::optional<uint32_t> layers, embd, heads, heads_kv, head_dim, ff, interval, rope_dim, ssm_conv, ssm_state,
      ssm_groups, ssm_heads, swa_window, swa_pattern, vocab_size;
  std::optional<uint64_t> seed;

  app.add_option("--arch", arch, "architecture: llama, qwen3, qwen35, gemma3");
  app.add_option("--preset", preset, "named preset (see --list-presets)");
  app.add_option("--out,-o", out, "output file");
  app.add_flag("--list-presets", list_presets, "list the presets and exit");
  app.add_flag("--default-model", default_model, "write the built-in default model of `kvgate up` into the cache");
  app.add_option("--layers", layers, "block count");
  app.add_option("--embd", embd, "embedding length");
  app.add_option("--heads", heads, "attention heads");
  app.add_option("--heads-kv", heads_kv, "KV heads (GQA; 1 = MQA)");
  app.add_option("--head-dim", head_dim, "key/value length per head");
  app.add_option("--ff", ff, "feed-forward length");
  app.add_option("--ctx-train", ctx_train, "training context (e.g. 32k, 131072)");
  app.add_option("--interval", interval, "qwen35: full attention every N layers");
  app.add_option("--rope-dim", rope_dim, "qwen35: rotary dimensions");
  app.add_option("--ssm-conv", ssm_conv, "qwen35: convolution kernel");
  app.add_option("--ssm-state", ssm_state, "qwen35: linear-attention head dim");
  app.add_option("--ssm-groups", ssm_groups, "qwen35: linear-attention k heads");
  app.add_option("--ssm-heads", ssm_heads, "qwen35: linear-attention v heads");
  app.add_option("--swa-window", swa_window, "gemma3: sliding window");
  app.add_option("--swa-pattern", swa_pattern, "gemma3: every Nth layer is dense");
  app.add_option("--type", type_name, "weight type: f32, f16 (default), bf16, q8_0");
  app.add_option("--seed", seed, "random seed (default 1)");
  app.add_option("--name", name, "general.name");
  app.add_flag("--metadata-only", metadata_only, "header and tensor infos only, no data (for planning)");
  app.add_option("--chat-template", chat_template,
                 "chat template: a Jinja file, or 'vocab' to keep the vocabulary's own (default: kvgate's built-in "
                 "qwen3-style template with tools and thinking)");
  app.add_option("--vocab", vocab, "tokenizer GGUF to copy (default: the release's ggml-vocab-qwen2.gguf)");
  app.add_option("--vocab-size", vocab_size,
                 "write no tokenizer, only this many embedding rows (readable and plannable; the engine cannot load it)");
  if (auto code = parse_args(app, argc, argv)) return *code;

  if (list_presets) {
    print_presets();
    return kExitOk;
  }
  auto fail = [](const std::string& msg, int code = kExitFailure) {
    std::fprintf(stderr, "kvgate synth: %s\n", msg.c_str());
    return code;
  };

  gguf::SynthSpec spec;
  if (default_model) {
    spec = gguf::find_synth_preset("default")->spec;
    if (out.empty()) out = engine::default_model_path().string();
  } else if (!preset.empty()) {
    const auto* p = gguf::find_synth_preset(preset);
    if (p == nullptr) {
      std::fprintf(stderr, "kvgate synth: unknown preset '%s'; presets:\n", preset.c_str());
      print_presets();
      return kExitUsage;
    }
    spec = p->spec;
    if (!arch.empty() && arch != spec.arch) {
      return fail(fmt::format("--arch {} contradicts --preset {} ({})", arch, preset, spec.arch), kExitUsage);
    }
  } else if (!arch.empty()) {
    auto d = gguf::synth_defaults(arch);
    if (!d) return fail(d.error().message(), kExitUsage);
    spec = *d;
  } else {
    return fail("give --arch, --preset or --default-model (kvgate synth --help)", kExitUsage);
  }
  if (out.empty()) return fail("--out is required", kExitUsage);

  auto set = [](auto& field, const auto& opt) {
    if (opt) field = *opt;
  };
  set(spec.n_layer, layers);
  set(spec.n_embd, embd);
  set(spec.n_head, heads);
  set(spec.n_head_kv, heads_kv);
  set(spec.head_dim, head_dim);
  set(spec.n_ff, ff);
  set(spec.interval, interval);
  set(spec.rope_dim, rope_dim);
  set(spec.ssm_conv_kernel, ssm_conv);
  set(spec.ssm_state, ssm_state);
  set(spec.ssm_groups, ssm_groups);
  set(spec.ssm_dt_rank, ssm_heads);
  set(spec.swa_window, swa_window);
  set(spec.swa_pattern, swa_pattern);
  set(spec.seed, seed);
  set(spec.n_vocab, vocab_size);
  if (!name.empty()) spec.name = name;
  if (chat_template == "vocab") {
    spec.chat_template = "";
  } else if (!chat_template.empty()) {
    std::ifstream in(chat_template);
    if (!in) return fail(fmt::format("--chat-template: cannot read '{}'", chat_template), kExitUsage);
    spec.chat_template = std::string(std::istreambuf_iterator<char>(in), {});
    if (spec.chat_template->empty()) return fail(fmt::format("--chat-template: '{}' is empty", chat_template), kExitUsage);
  }
  if (metadata_only) spec.metadata_only = true;
  if (!ctx_train.empty()) {
    auto n = util::parse_tokens(ctx_train);
    if (!n || *n == 0 || *n > 0xffffffffULL) return fail(fmt::format("--ctx-train '{}' is not a valid context", ctx_train), kExitUsage);
    spec.ctx_train = static_cast<uint32_t>(*n);
  }
  if (!type_name.empty()) {
    auto t = gguf::ggml_type_from_name(type_name);
    if (!t) return fail(fmt::format("--type '{}' is not a ggml type (f32, f16, bf16, q8_0)", type_name), kExitUsage);
    spec.weight_type = *t;
  }
  if (auto v = gguf::validate(spec); !v) return fail(v.error().message(), kExitUsage);

  std::optional<gguf::File> vocab_file;
  // Without --vocab-size the tokenizer comes from --vocab or the release's qwen2 vocabulary;
  // with it (and no --vocab) the file has no tokenizer and only kvgate can read it. Presets of
  // real shapes keep their own vocabulary size the same way.
  if (!vocab.empty() || (!vocab_size && !spec.keep_vocab_size)) {
    std::string path = vocab;
    if (path.empty()) {
      auto found = engine::vocab_file("qwen2");
      if (!found) return fail(found.error().message());
      path = found->string();
    }
    auto f = gguf::File::open(path);
    if (!f) return fail("reading the vocabulary: " + f.error().message());
    vocab_file = std::move(*f);
  }

  std::error_code ec;
  const auto parent = std::filesystem::path(out).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  const auto start = std::chrono::steady_clock::now();
  auto result = gguf::synthesize(spec, vocab_file ? &*vocab_file : nullptr, out);
  if (!result) return fail(result.error().message());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print("wrote {} ({}{}, {} tensors, {:.2f} M parameters, {} tensor bytes) in {:.2f} s\n", out, spec.arch,
             spec.metadata_only ? ", metadata-only" : "", result->tensor_count,
             static_cast<double>(result->n_params) / 1e6, util::format_bytes(result->tensor_bytes), secs);
  return kExitOk;
}

}  // namespace kvgate::cli
