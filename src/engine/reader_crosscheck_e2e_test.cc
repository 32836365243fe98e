// Our GGUF reader against an independent one (the npm @huggingface/gguf parser, run with
// node): every tokenizer-only GGUF the pinned release ships, and a synthesized model, must
// give the same keys, value types, array element types and lengths, every value, and the
// same tensor infos.
#include <gtest/gtest.h>

#include <mutex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/pinned.h"
#include "gguf/file.h"
#include "gguf/synth.h"
#include "testing/paths.h"
#include "util/subprocess.h"

namespace kvgate::engine {
namespace {

using nlohmann::json;

Result<json> independent_dump(const std::filesystem::path& file) {
  const std::string script = std::string(kvgate::testing::source_dir()) + "/tests/npm/gguf_dump.mjs";
  std::string out;
  std::mutex mu;
  KV_ASSIGN_OR_RETURN(auto proc, util::Subprocess::spawn({.argv = {"/usr/bin/env", "node", script, file.string()},
                                                          .on_line = [&](std::string_view l) {
                                                            std::lock_guard lock(mu);
                                                            out.append(l);
                                                          }}));
  auto status = proc->wait_for(std::chrono::seconds(120));
  proc->stop();
  if (!status || status->code != 0) return Error("node gguf_dump.mjs failed: " + out.substr(0, 2000));
  std::lock_guard lock(mu);
  auto parsed = json::parse(out, nullptr, false);
  if (parsed.is_discarded()) return Error("node gguf_dump.mjs printed invalid JSON: " + out.substr(0, 500));
  return parsed;
}

// Compares one of our values with the other parser's JSON rendering; returns "" if equal.
std::string compare_value(const gguf::Value& v, const json& theirs) {
  using gguf::ValueType;
  switch (v.type()) {
    case ValueType::UINT64:
      return theirs == std::to_string(*v.as_uint()) ? "" : fmt::format("{} vs {}", *v.as_uint(), theirs.dump());
    case ValueType::INT64:
      return theirs == std::to_string(*v.as_int()) ? "" : fmt::format("{} vs {}", *v.as_int(), theirs.dump());
    case ValueType::FLOAT32:
    case ValueType::FLOAT64:
      return theirs.is_number() && theirs.get<double>() == *v.as_float() ? "" : fmt::format("{} vs {}", *v.as_float(), theirs.dump());
    case ValueType::BOOL:
      return theirs == *v.as_bool() ? "" : "bool differs";
    case ValueType::STRING: {
      std::string_view mine = *v.as_string();
      // The other parser decodes with JavaScript's TextDecoder, which drops a leading UTF-8
      // byte-order mark (tokens such as "\xEF\xBB\xBF" in the phi-3 and gemma-4 vocabularies).
      if (mine.substr(0, 3) == "\xEF\xBB\xBF") mine.remove_prefix(3);
      return theirs == std::string(mine) ? "" : fmt::format("string differs: '{}' vs {}", mine, theirs.dump());
    }
    case ValueType::ARRAY: {
      if (!theirs.is_array() || theirs.size() != v.size()) return "array length differs";
      size_t i = 0;
      for (gguf::Value e : v) {
        auto d = compare_value(e, theirs[i]);
        if (!d.empty()) return fmt::format("element {}: {}", i, d);
        ++i;
      }
      return "";
    }
    default:
      return theirs.is_number_integer() && theirs.get<int64_t>() == *v.as_int() ? "" : "integer differs";
  }
}

void expect_same(const std::filesystem::path& path) {
  SCOPED_TRACE(path.string());
  auto ours = gguf::File::open(path);
  ASSERT_TRUE(ours.ok()) << ours.error().message();
  auto theirs = independent_dump(path);
  ASSERT_TRUE(theirs.ok()) << theirs.error().message();
  const json& meta = (*theirs)["metadata"];
  EXPECT_EQ((*theirs)["header"]["version"], ours->version());
  EXPECT_EQ(meta.size(), ours->metadata().size());
  for (const auto& kv : ours->metadata()) {
    const std::string key(kv.key);
    ASSERT_TRUE(meta.contains(key)) << "their parser has no key " << key;
    const json& t = meta[key];
    EXPECT_EQ(t["type"], static_cast<uint32_t>(kv.value.type())) << key;
    if (kv.value.is_array()) {
      EXPECT_EQ(t["element_type"], static_cast<uint32_t>(kv.value.element_type())) << key;
      EXPECT_EQ(t["count"], kv.value.size()) << key;
    }
    EXPECT_EQ(compare_value(kv.value, t["value"]), "") << key;
  }
  const json& tensors = (*theirs)["tensors"];
  ASSERT_EQ(tensors.size(), ours->tensors().size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& mine = ours->tensors()[i];
    EXPECT_EQ(tensors[i]["name"], std::string(mine.name));
    EXPECT_EQ(tensors[i]["type"], static_cast<uint32_t>(mine.type));
    EXPECT_EQ(tensors[i]["offset"], std::to_string(mine.offset));
    ASSERT_EQ(tensors[i]["dims"].size(), mine.n_dims);
    for (uint32_t d = 0; d < mine.n_dims; ++d) EXPECT_EQ(tensors[i]["dims"][d], std::to_string(mine.ne[d]));
  }
}

TEST(ReaderCrosscheckTest, EveryTokenizerGgufOfTheRelease) {
  auto qwen2 = vocab_file("qwen2");
  ASSERT_TRUE(qwen2.ok()) << qwen2.error().message();
  size_t checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(qwen2->parent_path())) {
    if (entry.path().extension() != ".gguf") continue;
    expect_same(entry.path());
    ++checked;
  }
  EXPECT_GE(checked, 15U);
}

TEST(ReaderCrosscheckTest, SynthesizedModelsWithTensors) {
  auto vocab = gguf::File::open(*vocab_file("qwen2"));
  ASSERT_TRUE(vocab.ok());
  for (auto arch : gguf::synth_architectures()) {
    const auto path = std::filesystem::temp_directory_path() / fmt::format("kvgate_xcheck_{}_{}.gguf", arch, ::getpid());
    auto spec = *gguf::synth_defaults(arch);
    spec.metadata_only = true;  // tensor infos are what is compared; no need for data
    ASSERT_TRUE(gguf::synthesize(spec, &*vocab, path).ok());
    expect_same(path);
    std::filesystem::remove(path);
  }
}

}  // namespace
}  // namespace kvgate::engine
