// gguf::File: a parsed GGUF model file (v2 or v3), header only.
//
// Opening maps the file and parses the header: magic, version, metadata key/values, tensor
// infos; it never reads tensor data, so opening a multi-GB model touches a few pages and
// takes milliseconds. Everything in the header is validated before open() returns:
//   - every read is bounds-checked; counts are checked against the bytes that remain before
//     anything is allocated; count × size products are overflow-checked;
//   - value types, nesting depth (≤ 8), duplicate keys and tensor names, tensor dims
//     (1-4, each ≥ 1, element count < 2^63), tensor types, row sizes versus block sizes,
//     `general.alignment` (u32, power of two), tensor offsets (aligned, non-overlapping)
//     and that the data region lies inside the file.
// Errors name the byte offset and what was expected there.
//
// A file written with `kvgate synth --metadata-only` carries `kvgate.metadata_only = true`
// and no data region; it opens successfully with metadata_only() == true. Any other file
// whose data region is missing or short is reported as truncated.
//
// Thread-safety: a File is immutable after open(); concurrent reads are safe. Views
// (string_views, Values, TensorInfo names) are valid while the File is alive (also across
// moves).
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gguf/ggml_type.h"
#include "gguf/value.h"
#include "util/byte_cursor.h"
#include "util/mapped_file.h"
#include "util/result.h"

namespace kvgate::gguf {

inline constexpr uint32_t kDefaultAlignment = 32;
inline constexpr uint32_t kMaxDims = 4;
inline constexpr size_t kMaxTensorName = 63;  // ggml's GGML_MAX_NAME (64) minus the NUL
inline constexpr std::string_view kMetadataOnlyKey = "kvgate.metadata_only";

struct KeyValue {
  std::string_view key;
  Value value;
  uint64_t offset = 0;  // offset of the entry (its key length field) in the file
};

struct TensorInfo {
  std::string_view name;
  GgmlType type = GgmlType::F32;
  uint32_t n_dims = 0;
  std::array<uint64_t, kMaxDims> ne{1, 1, 1, 1};  // GGUF order: ne[0] is the row length
  uint64_t offset = 0;       // relative to the start of the data region
  uint64_t n_elements = 0;
  uint64_t n_bytes = 0;
};

class File {
 public:
  static Result<File> open(const std::filesystem::path& path);
  // Parses bytes held in memory (tests, fuzzing). The File keeps its own copy.
  static Result<File> parse(std::span<const std::byte> bytes);

  File(File&&) noexcept = default;
  File& operator=(File&&) noexcept = default;

  uint32_t version() const { return version_; }
  uint64_t file_size() const { return bytes_.size(); }
  uint32_t alignment() const { return alignment_; }
  // Offset of the first byte after the tensor infos, and of the (aligned) data region.
  uint64_t header_size() const { return header_size_; }
  uint64_t data_offset() const { return data_offset_; }
  // Bytes the tensors occupy in the data region (end of the last tensor).
  uint64_t data_size() const { return data_size_; }
  uint64_t tensor_bytes() const { return tensor_bytes_; }
  bool metadata_only() const { return metadata_only_; }

  const std::vector<KeyValue>& metadata() const { return metadata_; }
  const Value* find(std::string_view key) const;
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;

  // Convenience typed lookups; nullopt when absent or of another kind.
  std::optional<uint64_t> get_uint(std::string_view key) const;
  std::optional<double> get_float(std::string_view key) const;
  std::optional<bool> get_bool(std::string_view key) const;
  std::optional<std::string_view> get_string(std::string_view key) const;
  // `general.architecture`, or "" when absent.
  std::string_view architecture() const;

  // The bytes of a tensor's data. Empty for a metadata-only file.
  std::span<const std::byte> tensor_data(const TensorInfo& tensor) const;

 private:
  File() = default;
  Status parse_all();
  Status parse_metadata(util::ByteCursor& cursor, uint64_t count);
  Status parse_tensor_infos(util::ByteCursor& cursor, uint64_t count);
  Status check_data_region();

  util::MappedFile mapping_;
  std::vector<std::byte> owned_;
  std::span<const std::byte> bytes_;

  uint32_t version_ = 0;
  uint32_t alignment_ = kDefaultAlignment;
  uint64_t header_size_ = 0;
  uint64_t data_offset_ = 0;
  uint64_t data_size_ = 0;
  uint64_t tensor_bytes_ = 0;
  bool metadata_only_ = false;
  std::vector<KeyValue> metadata_;
  std::unordered_map<std::string_view, size_t> key_index_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string_view, size_t> tensor_index_;
};

}  // namespace kvgate::gguf
