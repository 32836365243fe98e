// gguf::Writer: builds a GGUF v3 file (metadata, tensor infos, tensor data).
//
// Metadata and tensors are added in the order they should appear; write() lays out the
// data region (each tensor aligned to `general.alignment`, default 32) and streams the
// file. Tensor data comes from a fill callback, called once per tensor at write time with a
// buffer of exactly the tensor's byte size, so a model never has to be held in memory
// twice; the fills of several tensors run at once on worker threads (a fill must touch
// only its own buffer), and the file is the same as with one. With metadata_only, the data
// region is omitted and `kvgate.metadata_only = true` is recorded; such a file has the
// header of the full model and is a few KB to MB.
//
// Not thread-safe. Errors (duplicate keys or tensor names, bad shapes, I/O) are returned
// from the add/write calls.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/ggml_type.h"
#include "gguf/value.h"
#include "util/result.h"

namespace kvgate::gguf {

using TensorFill = std::function<void(std::span<std::byte> out)>;

class Writer {
 public:
  Status add_u32(std::string_view key, uint32_t v);
  Status add_i32(std::string_view key, int32_t v);
  Status add_u64(std::string_view key, uint64_t v);
  Status add_f32(std::string_view key, float v);
  Status add_bool(std::string_view key, bool v);
  Status add_string(std::string_view key, std::string_view v);
  Status add_u32_array(std::string_view key, std::span<const uint32_t> v);
  Status add_i32_array(std::string_view key, std::span<const int32_t> v);
  Status add_f32_array(std::string_view key, std::span<const float> v);
  Status add_bool_array(std::string_view key, std::span<const bool> v);
  Status add_string_array(std::string_view key, std::span<const std::string> v);
  // Adds a value exactly as encoded in another file (type + payload).
  Status add_value(std::string_view key, const Value& value);
  // Adds a pre-encoded value (used for arbitrary nesting in tests).
  Status add_raw(std::string_view key, ValueType type, std::span<const std::byte> payload);

  // ne in GGUF order (ne[0] = row length). REQUIRES: 1-4 dims, each ≥ 1.
  Status add_tensor(std::string_view name, GgmlType type, std::vector<uint64_t> ne, TensorFill fill);

  bool has_key(std::string_view key) const;
  size_t tensor_count() const { return tensors_.size(); }
  // Sum of tensor data bytes (without alignment padding).
  uint64_t tensor_bytes() const;

  // Writes the file (to a temporary name, then renamed into place).
  Status write(const std::filesystem::path& path, bool metadata_only = false) const;

  // The encoded header (everything before the data region, without trailing padding).
  std::vector<std::byte> encode_header(bool metadata_only = false) const;

 private:
  struct Entry {
    std::string key;
    ValueType type;
    std::vector<std::byte> payload;
  };
  struct Tensor {
    std::string name;
    GgmlType type;
    std::vector<uint64_t> ne;
    uint64_t n_bytes;
    uint64_t offset;
    TensorFill fill;
  };
  Status add_entry(std::string_view key, ValueType type, std::vector<std::byte> payload);
  uint32_t alignment() const;
  void write_tensor_data(std::ofstream& f, uint64_t data_start, uint64_t& pos,
                         const std::function<void(uint64_t)>& pad_to) const;

  std::vector<Entry> entries_;
  std::vector<Tensor> tensors_;
};

}  // namespace kvgate::gguf
