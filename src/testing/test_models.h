// Test support: metadata-only GGUF models with chosen hyperparameters, written with
// gguf::Writer (architectures synth cannot write) or gguf::synthesize, then described.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/synth.h"
#include "plan/model_desc.h"
#include "util/result.h"

namespace kvgate::testing {

using plan::DescribeOptions;
using plan::ModelDescriptor;

class MetaModel {
 public:
  explicit MetaModel(std::string arch) : arch_(std::move(arch)) {}

  // `<arch>.<key>` = v
  MetaModel& u32(const std::string& key, uint32_t v);
  MetaModel& u32s(const std::string& key, std::vector<uint32_t> v);
  // A signed scalar (a negative one is a malformed value for the planner's u32 keys).
  MetaModel& i32(const std::string& key, int32_t v);
  MetaModel& bools(const std::string& key, std::vector<bool> v);
  // A token embedding of n_embd × n_vocab F16 (and an output.weight unless tied).
  MetaModel& vocab(uint32_t n_vocab, bool tied = true);

  // Writes the file (metadata only) and describes it.
  Result<ModelDescriptor> describe() const;

 private:
  struct Key {
    std::string key;
    std::vector<uint32_t> values;
    bool array = false;
    bool boolean = false;
    bool is_signed = false;
  };
  std::string arch_;
  std::vector<Key> keys_;
  uint32_t n_vocab_ = 0;
  bool tied_ = true;
};

// synthesize(spec with metadata_only) without a tokenizer, then describe (with `options`:
// at a weight recipe).
Result<ModelDescriptor> describe_synth(gguf::SynthSpec spec, const DescribeOptions& options = {});

}  // namespace kvgate::testing
