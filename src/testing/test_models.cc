#include "testing/test_models.h"

#include <unistd.h>

#include <atomic>
#include <filesystem>

#include <fmt/format.h>

#include "gguf/file.h"
#include "gguf/writer.h"

namespace kvgate::testing {

using plan::describe_model;

namespace {

std::filesystem::path temp_path(std::string_view tag) {
  static std::atomic<int> counter{0};
  return std::filesystem::temp_directory_path() /
         fmt::format("kvgate_plan_{}_{}_{}.gguf", tag, ::getpid(), counter.fetch_add(1));
}

Result<ModelDescriptor> open_and_describe(const std::filesystem::path& path, const DescribeOptions& options = {}) {
  auto file = gguf::File::open(path);
  std::filesystem::remove(path);
  if (!file) return std::move(file).error();
  return describe_model(*file, options);
}

}  // namespace

MetaModel& MetaModel::u32(const std::string& key, uint32_t v) {
  keys_.push_back({key, {v}, false, false});
  return *this;
}

MetaModel& MetaModel::u32s(const std::string& key, std::vector<uint32_t> v) {
  keys_.push_back({key, std::move(v), true, false});
  return *this;
}

MetaModel& MetaModel::i32(const std::string& key, int32_t v) {
  keys_.push_back({key, {static_cast<uint32_t>(v)}, false, false, true});
  return *this;
}

MetaModel& MetaModel::bools(const std::string& key, std::vector<bool> v) {
  std::vector<uint32_t> values(v.begin(), v.end());
  keys_.push_back({key, std::move(values), true, true});
  return *this;
}

MetaModel& MetaModel::vocab(uint32_t n_vocab, bool tied) {
  n_vocab_ = n_vocab;
  tied_ = tied;
  return *this;
}

Result<ModelDescriptor> MetaModel::describe() const {
  gguf::Writer w;
  KV_TRY(w.add_string("general.architecture", arch_));
  uint32_t n_embd = 0;
  for (const auto& k : keys_) {
    const std::string full = arch_ + "." + k.key;
    if (k.key == "embedding_length" && !k.values.empty()) n_embd = k.values[0];
    if (k.is_signed) {
      KV_TRY(w.add_i32(full, static_cast<int32_t>(k.values[0])));
    } else if (!k.array) {
      KV_TRY(w.add_u32(full, k.values[0]));
    } else if (k.boolean) {
      std::vector<bool> flags(k.values.begin(), k.values.end());
      auto data = std::make_unique<bool[]>(flags.size());
      for (size_t i = 0; i < flags.size(); ++i) data[i] = flags[i];
      KV_TRY(w.add_bool_array(full, std::span<const bool>(data.get(), flags.size())));
    } else {
      KV_TRY(w.add_u32_array(full, k.values));
    }
  }
  if (n_vocab_ > 0 && n_embd > 0) {
    KV_TRY(w.add_tensor("token_embd.weight", gguf::GgmlType::F16, {n_embd, n_vocab_}, nullptr));
    if (!tied_) KV_TRY(w.add_tensor("output.weight", gguf::GgmlType::F16, {n_embd, n_vocab_}, nullptr));
  }
  const auto path = temp_path(arch_);
  KV_TRY(w.write(path, /*metadata_only=*/true));
  return open_and_describe(path);
}

Result<ModelDescriptor> describe_synth(gguf::SynthSpec spec, const DescribeOptions& options) {
  spec.metadata_only = true;
  const auto path = temp_path(spec.arch);
  auto written = gguf::synthesize(spec, nullptr, path);
  if (!written) return std::move(written).error();
  return open_and_describe(path, options);
}

}  // namespace kvgate::testing
