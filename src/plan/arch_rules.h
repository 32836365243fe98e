// Per-architecture memory rules, as the pinned engine applies them (internal to the planner).
//
// describe_model() reads the generic keys (block count, heads, key/value lengths, feed-
// forward lengths) and then calls apply_arch_rules(), which decides for the descriptor's
// architecture which layers are sliding-window, recurrent, indexer-carrying or KV-less, sets
// the window, the MLA shape and the recurrent state size, and records what it assumed in
// `notes`. The rules restate the engine's behaviour (layer patterns, default windows and
// intervals, filters of nextn blocks); reference/kv_estimation.md §1 lists them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/file.h"
#include "plan/model_desc.h"
#include "util/result.h"

namespace kvgate::plan {

// Typed access to `<arch>.<key>` values with the engine's conventions. A key that is absent
// reads as nullopt; one that is present but malformed (negative, too large, wrong kind,
// per-layer arrays of the wrong length) is an Error naming the key, and the caller stops there.
class ArchKeys {
 public:
  ArchKeys(const gguf::File& file, std::string arch, uint32_t n_layer_all)
      : file_(file), arch_(std::move(arch)), n_layer_all_(n_layer_all) {}

  bool has(std::string_view key) const;
  // A scalar unsigned integer (or bool) that fits 32 bits; an array reads as absent.
  Result<std::optional<uint32_t>> u32(std::string_view key) const;
  // u32(key), or `fallback` when absent.
  Result<uint32_t> u32_or(std::string_view key, uint32_t fallback) const;
  // A scalar, or an array of `n` integers/bools (n = block_count unless given): one value
  // per layer.
  Result<std::optional<std::vector<uint32_t>>> per_layer(std::string_view key, uint32_t n = 0) const;
  // True when the key holds an array (of any length).
  bool is_array(std::string_view key) const;

  uint32_t n_layer_all() const { return n_layer_all_; }
  const gguf::File& file() const { return file_; }

 private:
  std::string full(std::string_view key) const { return arch_ + "." + std::string(key); }

  const gguf::File& file_;
  std::string arch_;
  uint32_t n_layer_all_;
};

// Applies the architecture's rules to `d` (whose generic fields and per-layer heads are
// filled; every layer starts with kv = true). Unknown architectures keep the dense rule and
// get known_arch = false with a note.
Status apply_arch_rules(const ArchKeys& keys, ModelDescriptor& d);

}  // namespace kvgate::plan
