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

// The command line, as given.
struct SynthArgs {
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
};

void add_synth_options(CLI::App& app, SynthArgs& a) {
  app.add_option("--arch", a.arch, "architecture: llama, qwen3, qwen35, gemma3");
  app.add_option("--preset", a.preset, "named preset (see --list-presets)");
  app.add_option("--out,-o", a.out, "output file");
  app.add_flag("--list-presets", a.list_presets, "list the presets and exit");
  app.add_flag("--default-model", a.default_model, "write the built-in default model of `kvgate up` into the cache");
  app.add_option("--layers", a.layers, "block count");
  app.add_option("--embd", a.embd, "embedding length");
  app.add_option("--heads", a.heads, "attention heads");
  app.add_option("--heads-kv", a.heads_kv, "KV heads (GQA; 1 = MQA)");
  app.add_option("--head-dim", a.head_dim, "key/value length per head");
  app.add_option("--ff", a.ff, "feed-forward length");
  app.add_option("--ctx-train", a.ctx_train, "training context (e.g. 32k, 131072)");
  app.add_option("--interval", a.interval, "qwen35: full attention every N layers");
  app.add_option("--rope-dim", a.rope_dim, "qwen35: rotary dimensions");
  app.add_option("--ssm-conv", a.ssm_conv, "qwen35: convolution kernel");
  app.add_option("--ssm-state", a.ssm_state, "qwen35: linear-attention head dim");
  app.add_option("--ssm-groups", a.ssm_groups, "qwen35: linear-attention k heads");
  app.add_option("--ssm-heads", a.ssm_heads, "qwen35: linear-attention v heads");
  app.add_option("--swa-window", a.swa_window, "gemma3: sliding window");
  app.add_option("--swa-pattern", a.swa_pattern, "gemma3: every Nth layer is dense");
  app.add_option("--type", a.type_name, "weight type: f32, f16 (default), bf16, q8_0, q4_0");
  app.add_option("--seed", a.seed, "random seed (default 1)");
  app.add_option("--name", a.name, "general.name");
  app.add_flag("--metadata-only", a.metadata_only, "header and tensor infos only, no data (for planning)");
  app.add_option("--chat-template", a.chat_template,
                 "chat template: a Jinja file, or 'vocab' to keep the vocabulary's own (default: kvgate's built-in "
                 "qwen3-style template with tools and thinking)");
  app.add_option("--vocab", a.vocab, "tokenizer GGUF to copy (default: the release's ggml-vocab-qwen2.gguf)");
  app.add_option("--vocab-size", a.vocab_size,
                 "write no tokenizer, only this many embedding rows (readable and plannable; the engine cannot load it)");
}

// The spec to start from: the default model (whose file is the default --out), a known
// preset, or an architecture's defaults. Errors are usage errors.
Result<gguf::SynthSpec> base_spec(SynthArgs& a) {
  if (a.default_model) {
    if (a.out.empty()) a.out = engine::default_model_path().string();
    return gguf::find_synth_preset("default")->spec;
  }
  if (!a.preset.empty()) {
    const gguf::SynthSpec& spec = gguf::find_synth_preset(a.preset)->spec;
    if (!a.arch.empty() && a.arch != spec.arch) {
      return Error(fmt::format("--arch {} contradicts --preset {} ({})", a.arch, a.preset, spec.arch));
    }
    return spec;
  }
  if (!a.arch.empty()) return gguf::synth_defaults(a.arch);
  return Error("give --arch, --preset or --default-model (kvgate synth --help)");
}

// The dimensions and choices given on the command line, over the base spec. Errors are usage
// errors.
Status apply_overrides(const SynthArgs& a, gguf::SynthSpec& spec) {
  auto set = [](auto& field, const auto& opt) {
    if (opt) field = *opt;
  };
  set(spec.n_layer, a.layers);
  set(spec.n_embd, a.embd);
  set(spec.n_head, a.heads);
  set(spec.n_head_kv, a.heads_kv);
  set(spec.head_dim, a.head_dim);
  set(spec.n_ff, a.ff);
  set(spec.interval, a.interval);
  set(spec.rope_dim, a.rope_dim);
  set(spec.ssm_conv_kernel, a.ssm_conv);
  set(spec.ssm_state, a.ssm_state);
  set(spec.ssm_groups, a.ssm_groups);
  set(spec.ssm_dt_rank, a.ssm_heads);
  set(spec.swa_window, a.swa_window);
  set(spec.swa_pattern, a.swa_pattern);
  set(spec.seed, a.seed);
  set(spec.n_vocab, a.vocab_size);
  if (!a.name.empty()) spec.name = a.name;
  if (a.chat_template == "vocab") {
    spec.chat_template = "";
  } else if (!a.chat_template.empty()) {
    std::ifstream in(a.chat_template);
    if (!in) return Error(fmt::format("--chat-template: cannot read '{}'", a.chat_template));
    spec.chat_template = std::string(std::istreambuf_iterator<char>(in), {});
    if (spec.chat_template->empty()) return Error(fmt::format("--chat-template: '{}' is empty", a.chat_template));
  }
  if (a.metadata_only) spec.metadata_only = true;
  if (!a.ctx_train.empty()) {
    auto n = util::parse_tokens(a.ctx_train);
    if (!n || *n == 0 || *n > 0xffffffffULL) return Error(fmt::format("--ctx-train '{}' is not a valid context", a.ctx_train));
    spec.ctx_train = static_cast<uint32_t>(*n);
  }
  if (!a.type_name.empty()) {
    auto t = gguf::ggml_type_from_name(a.type_name);
    if (!t) return Error(fmt::format("--type '{}' is not a ggml type (f32, f16, bf16, q8_0, q4_0)", a.type_name));
    spec.weight_type = *t;
  }
  return gguf::validate(spec);
}

// The tokenizer to copy. Without --vocab-size it comes from --vocab or the release's qwen2
// vocabulary; with it (and no --vocab) the file has no tokenizer and only kvgate can read it.
// Presets of real shapes keep their own vocabulary size the same way.
Result<std::optional<gguf::File>> vocabulary(const SynthArgs& a, const gguf::SynthSpec& spec) {
  if (a.vocab.empty() && (a.vocab_size || spec.keep_vocab_size)) return std::optional<gguf::File>();
  std::string path = a.vocab;
  if (path.empty()) {
    KV_ASSIGN_OR_RETURN(auto found, engine::vocab_file("qwen2"));
    path = found.string();
  }
  auto f = gguf::File::open(path);
  if (!f) return std::move(f).error().with_context("reading the vocabulary");
  return std::optional<gguf::File>(std::move(*f));
}

}  // namespace

int run_synth(int argc, char** argv) {
  CLI::App app{"Write a GGUF model with random weights that llama-server loads and serves "
               "(llama, qwen3, qwen35 hybrid, gemma3 sliding-window).",
               "kvgate synth"};
  SynthArgs a;
  add_synth_options(app, a);
  if (auto code = parse_args(app, argc, argv)) return *code;

  if (a.list_presets) {
    print_presets();
    return kExitOk;
  }
  auto fail = [](const std::string& msg, int code = kExitFailure) {
    std::fprintf(stderr, "kvgate synth: %s\n", msg.c_str());
    return code;
  };
  if (!a.default_model && !a.preset.empty() && gguf::find_synth_preset(a.preset) == nullptr) {
    std::fprintf(stderr, "kvgate synth: unknown preset '%s'; presets:\n", a.preset.c_str());
    print_presets();
    return kExitUsage;
  }
  auto spec = base_spec(a);
  if (!spec) return fail(spec.error().message(), kExitUsage);
  if (a.out.empty()) return fail("--out is required", kExitUsage);
  if (auto st = apply_overrides(a, *spec); !st) return fail(st.error().message(), kExitUsage);
  auto vocab_file = vocabulary(a, *spec);
  if (!vocab_file) return fail(vocab_file.error().message());

  std::error_code ec;
  const auto parent = std::filesystem::path(a.out).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  const auto start = std::chrono::steady_clock::now();
  auto result = gguf::synthesize(*spec, *vocab_file ? &**vocab_file : nullptr, a.out);
  if (!result) return fail(result.error().message());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print("wrote {} ({}{}, {} tensors, {:.2f} M parameters, {} tensor bytes) in {:.2f} s\n", a.out, spec->arch,
             spec->metadata_only ? ", metadata-only" : "", result->tensor_count,
             static_cast<double>(result->n_params) / 1e6, util::format_bytes(result->tensor_bytes), secs);
  return kExitOk;
}

}  // namespace kvgate::cli
