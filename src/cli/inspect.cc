// kvgate inspect MODEL.gguf [--json] [--tensors]
//
// Prints what a GGUF file declares: architecture, the architecture's hyperparameters (every
// `<arch>.*` key, arrays included), general metadata, a tokenizer summary, and tensor
// counts and bytes by type. Reads only the header.
#include <cstdio>
#include <map>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/command.h"
#include "gguf/file.h"
#include "plan/chat_template.h"
#include "util/json.h"
#include "util/units.h"

namespace kvgate::cli {
namespace {

using nlohmann::json;

json value_to_json(const gguf::Value& v) {
  if (v.is_array()) {
    json arr = json::array();
    for (gguf::Value e : v) arr.push_back(value_to_json(e));
    return arr;
  }
  if (auto b = v.as_bool()) return *b;
  if (v.type() == gguf::ValueType::UINT64) return *v.as_uint();
  if (auto i = v.as_int()) return *i;
  if (auto f = v.as_float()) return *f;
  if (auto s = v.as_string()) return std::string(*s);
  return nullptr;
}

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

struct TypeTotals {
  uint64_t count = 0;
  uint64_t bytes = 0;
};

struct Summary {
  std::map<std::string, TypeTotals> by_type;
  uint64_t total_bytes = 0;
};

Summary summarize(const gguf::File& f) {
  Summary s;
  for (const auto& t : f.tensors()) {
    auto& tt = s.by_type[gguf::ggml_type_name(t.type)];
    ++tt.count;
    tt.bytes += t.n_bytes;
    s.total_bytes += t.n_bytes;
  }
  return s;
}

// Tokenizer summary: small keys in full, big arrays as counts.
json tokenizer_json(const gguf::File& f) {
  json tok = json::object();
  for (const auto& kv : f.metadata()) {
    if (!starts_with(kv.key, "tokenizer.")) continue;
    const std::string key(kv.key.substr(10));
    if (kv.value.is_array()) {
      tok[key + "_count"] = kv.value.size();
    } else if (key == "chat_template" || starts_with(key, "chat_template.")) {
      tok[key + "_chars"] = kv.value.as_string()->size();
    } else {
      tok[key] = value_to_json(kv.value);
    }
  }
  return tok;
}

json to_json(const std::string& path, const gguf::File& f, bool with_tensors) {
  const std::string arch(f.architecture());
  json out;
  out["path"] = path;
  out["file_size"] = f.file_size();
  out["gguf_version"] = f.version();
  out["architecture"] = arch;
  out["metadata_only"] = f.metadata_only();
  out["alignment"] = f.alignment();
  out["data_offset"] = f.data_offset();
  json hparams = json::object();
  json general = json::object();
  json other = json::object();
  for (const auto& kv : f.metadata()) {
    const std::string key(kv.key);
    if (!arch.empty() && starts_with(key, arch + ".")) {
      hparams[key.substr(arch.size() + 1)] = value_to_json(kv.value);
    } else if (starts_with(key, "general.")) {
      general[key.substr(8)] = value_to_json(kv.value);
    } else if (!starts_with(key, "tokenizer.")) {
      other[key] = kv.value.is_array() ? json(fmt::format("array of {}", kv.value.size())) : value_to_json(kv.value);
    }
  }
  out["hyperparameters"] = hparams;
  out["general"] = general;
  out["tokenizer"] = tokenizer_json(f);
  out["other_metadata"] = other;
  const Summary s = summarize(f);
  json by_type = json::object();
  for (const auto& [name, tt] : s.by_type) by_type[name] = {{"count", tt.count}, {"bytes", tt.bytes}};
  out["tensors"] = {{"count", f.tensors().size()}, {"bytes", s.total_bytes}, {"by_type", by_type}};
  if (with_tensors) {
    json list = json::array();
    for (const auto& t : f.tensors()) {
      list.push_back({{"name", std::string(t.name)},
                      {"type", gguf::ggml_type_name(t.type)},
                      {"shape", std::vector<uint64_t>(t.ne.begin(), t.ne.begin() + t.n_dims)},
                      {"offset", t.offset},
                      {"bytes", t.n_bytes}});
    }
    out["tensors"]["list"] = list;
  }
  return out;
}

void print_text(const std::string& path, const gguf::File& f, bool with_tensors) {
  const std::string arch(f.architecture());
  fmt::print("file          {} ({}, GGUF v{})\n", path, util::format_bytes(f.file_size()), f.version());
  fmt::print("architecture  {}\n", arch.empty() ? "(none: general.architecture is missing)" : arch);
  if (auto name = f.get_string("general.name")) fmt::print("name          {}\n", *name);
  if (f.metadata_only()) {
    fmt::print("data          metadata-only file: header and tensor shapes, no tensor data "
               "(for planning; the engine cannot load it)\n");
  }
  fmt::print("\nhyperparameters ({}.*)\n", arch);
  for (const auto& kv : f.metadata()) {
    if (arch.empty() || !starts_with(kv.key, arch + ".")) continue;
    fmt::print("  {:<40} {}\n", kv.key.substr(arch.size() + 1), kv.value.to_display(100));
  }
  fmt::print("\ntokenizer\n");
  const json tok = tokenizer_json(f);
  if (tok.empty()) fmt::print("  (no tokenizer metadata)\n");
  for (const auto& [key, value] : tok.items()) fmt::print("  {:<40} {}\n", key, util::json_text(value));
  const Summary s = summarize(f);
  fmt::print("\ntensors       {} tensors, {} ({} bytes)\n", f.tensors().size(), util::format_bytes(s.total_bytes),
             s.total_bytes);
  for (const auto& [name, tt] : s.by_type) {
    fmt::print("  {:<8} {:>6} tensors {:>14}\n", name, tt.count, util::format_bytes(tt.bytes));
  }
  if (with_tensors) {
    fmt::print("\n  {:<40} {:<8} {:<28} {:>14}\n", "name", "type", "shape", "bytes");
    for (const auto& t : f.tensors()) {
      std::string shape;
      for (uint32_t d = 0; d < t.n_dims; ++d) shape += (d ? " x " : "") + std::to_string(t.ne[d]);
      fmt::print("  {:<40} {:<8} {:<28} {:>14}\n", t.name, gguf::ggml_type_name(t.type), shape, t.n_bytes);
    }
  }
}

// The template on stdout, what was done with it on stderr.
int print_stable_template(const gguf::File& f) {
  const auto tmpl = f.get_string("tokenizer.chat_template");
  if (!tmpl) {
    std::fprintf(stderr, "kvgate inspect: the model has no chat template (tokenizer.chat_template)\n");
    return kExitFailure;
  }
  const plan::StableTemplate stable = plan::prefix_stable_template(*tmpl);
  std::fprintf(stderr, "kvgate inspect: %s\n", stable.describe().c_str());
  const std::string_view text = stable.patched() ? std::string_view(stable.text) : *tmpl;
  std::fwrite(text.data(), 1, text.size(), stdout);
  return kExitOk;
}

}  // namespace

int run_inspect(int argc, char** argv) {
  CLI::App app{"Print the metadata, hyperparameters, tokenizer summary and tensor sizes of a GGUF file "
               "(reads only the header).",
               "kvgate inspect"};
  std::string path;
  bool as_json = false;
  bool with_tensors = false;
  app.add_option("model", path, "GGUF model file")->required();
  app.add_flag("--json", as_json, "machine-readable output");
  app.add_flag("--tensors", with_tensors, "list every tensor");
  bool stable_template = false;
  app.add_flag("--stable-template", stable_template,
               "print the chat template `kvgate up` starts the engine with (for a server started otherwise: "
               "pass it with --chat-template-file)");
  if (auto code = parse_args(app, argc, argv)) return *code;

  auto file = gguf::File::open(path);
  if (!file) {
    std::fprintf(stderr, "kvgate inspect: %s\n", file.error().message().c_str());
    return kExitFailure;
  }
  if (stable_template) return print_stable_template(*file);
  if (as_json) {
    std::printf("%s\n", util::json_text(to_json(path, *file, with_tensors), 2).c_str());
  } else {
    print_text(path, *file, with_tensors);
  }
  return kExitOk;
}

}  // namespace kvgate::cli
