#include "gguf/file.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include <fmt/format.h>

namespace kvgate::gguf {
namespace {

using util::ByteCursor;

constexpr uint32_t kMaxNesting = 8;
// Smallest possible encodings, used to reject absurd counts before allocating anything.
constexpr uint64_t kMinKeyValueBytes = 8 + 1 + 4 + 1;  // key length, 1-char key, type, u8
constexpr uint64_t kMinTensorInfoBytes = 8 + 1 + 4 + 8 + 4 + 8;  // name, 1 dim, type, offset

std::string quoted(std::string_view s) {
  std::string out = "'";
  for (char c : s.substr(0, 96)) out += (static_cast<unsigned char>(c) < 0x20) ? '?' : c;
  if (s.size() > 96) out += "...";
  return out + "'";
}

bool checked_mul(uint64_t a, uint64_t b, uint64_t& out) {
  if (a != 0 && b > std::numeric_limits<uint64_t>::max() / a) return false;
  out = a * b;
  return true;
}

Result<std::string_view> read_string(ByteCursor& c, std::string_view what) {
  const uint64_t at = c.offset();
  KV_ASSIGN_OR_RETURN(uint64_t len, c.read<uint64_t>(std::string(what) + " length"));
  if (len > c.remaining()) {
    return Error(fmt::format("offset {}: {} length is {} bytes, but only {} bytes remain", at, what,
                             len, c.remaining()));
  }
  KV_ASSIGN_OR_RETURN(auto bytes, c.bytes(len, what));
  return std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

Result<ValueType> read_value_type(ByteCursor& c, std::string_view what) {
  const uint64_t at = c.offset();
  KV_ASSIGN_OR_RETURN(uint32_t raw, c.read<uint32_t>(what));
  if (!is_known_value_type(raw)) {
    return Error(fmt::format("offset {}: {} is {}, expected a GGUF value type 0-{}", at, what, raw,
                             kValueTypeCount - 1));
  }
  return static_cast<ValueType>(raw);
}

// Validates one encoded value of `type` and advances past it.
Status skip_value(ByteCursor& c, ValueType type, uint32_t depth) {
  if (size_t fixed = fixed_value_size(type); fixed != 0) {
    return c.skip(fixed, value_type_name(type) + " value");
  }
  if (type == ValueType::STRING) {
    KV_ASSIGN_OR_RETURN(std::string_view s, read_string(c, "string"));
    (void)s;
    return {};
  }
  // ARRAY
  if (depth >= kMaxNesting) {
    return c.error_here(fmt::format("arrays nested deeper than {} levels", kMaxNesting));
  }
  KV_ASSIGN_OR_RETURN(ValueType elem, read_value_type(c, "array element type"));
  const uint64_t count_at = c.offset();
  KV_ASSIGN_OR_RETURN(uint64_t count, c.read<uint64_t>("array element count"));
  if (size_t fixed = fixed_value_size(elem); fixed != 0) {
    uint64_t total = 0;
    if (!checked_mul(count, fixed, total) || total > c.remaining()) {
      return Error(fmt::format("offset {}: array of {} {} elements needs more bytes than the {} that remain",
                               count_at, count, value_type_name(elem), c.remaining()));
    }
    return c.skip(total, "array elements");
  }
  const uint64_t min_elem = elem == ValueType::STRING ? 8 : 12;
  if (count > c.remaining() / min_elem) {
    return Error(fmt::format("offset {}: array claims {} {} elements, more than the {} remaining bytes can hold",
                             count_at, count, value_type_name(elem), c.remaining()));
  }
  for (uint64_t i = 0; i < count; ++i) {
    KV_TRY(skip_value(c, elem, depth + 1));
  }
  return {};
}

}  // namespace

Result<File> File::open(const std::filesystem::path& path) {
  KV_ASSIGN_OR_RETURN(util::MappedFile mapping, util::MappedFile::open(path));
  File file;
  file.mapping_ = std::move(mapping);
  file.bytes_ = file.mapping_.bytes();
  KV_TRY(file.parse_all().with_context(path.string()));
  return file;
}

Result<File> File::parse(std::span<const std::byte> bytes) {
  File file;
  file.owned_.assign(bytes.begin(), bytes.end());
  file.bytes_ = file.owned_;
  KV_TRY(file.parse_all());
  return file;
}

Status File::parse_all() {
  ByteCursor c(bytes_);
  KV_ASSIGN_OR_RETURN(auto magic, c.bytes(4, "the GGUF magic 'GGUF'"));
  if (std::memcmp(magic.data(), "GGUF", 4) != 0) {
    std::string found;
    for (std::byte b : magic) {
      const auto ch = static_cast<unsigned char>(b);
      found += (ch >= 0x20 && ch < 0x7f) ? static_cast<char>(ch) : '?';
    }
    return Error("offset 0: not a GGUF file (expected magic 'GGUF', found '" + found + "')");
  }
  KV_ASSIGN_OR_RETURN(version_, c.read<uint32_t>("the GGUF version"));
  if (version_ == 1) {
    return Error("offset 4: GGUF version 1 is not supported (it predates 64-bit counts); versions 2 and 3 are");
  }
  if (version_ == 0x02000000 || version_ == 0x03000000) {
    return Error("offset 4: this is a big-endian GGUF file; only little-endian files are supported");
  }
  if (version_ != 2 && version_ != 3) {
    return Error(fmt::format("offset 4: unsupported GGUF version {} (expected 2 or 3)", version_));
  }
  KV_ASSIGN_OR_RETURN(uint64_t tensor_count, c.read<uint64_t>("the tensor count"));
  KV_ASSIGN_OR_RETURN(uint64_t kv_count, c.read<uint64_t>("the metadata key/value count"));
  if (kv_count > c.remaining() / kMinKeyValueBytes) {
    return Error(fmt::format("offset 16: metadata count {} is impossible: {} bytes remain", kv_count,
                             c.remaining()));
  }
  if (tensor_count > c.remaining() / kMinTensorInfoBytes) {
    return Error(fmt::format("offset 8: tensor count {} is impossible: {} bytes remain", tensor_count,
                             c.remaining()));
  }
  KV_TRY(parse_metadata(c, kv_count));
  KV_TRY(parse_tensor_infos(c, tensor_count));
  header_size_ = c.offset();
  return check_data_region();
}

Status File::parse_metadata(ByteCursor& c, uint64_t count) {
  metadata_.reserve(static_cast<size_t>(count));
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t entry_at = c.offset();
    auto context = [&](std::string_view key) {
      return key.empty() ? fmt::format("metadata entry #{}", i)
                         : fmt::format("metadata entry #{} ({})", i, quoted(key));
    };
    KV_ASSIGN_OR_RETURN(std::string_view key, read_string(c, "key").with_context(context("")));
    if (key.empty()) return Error(fmt::format("offset {}: {} has an empty key", entry_at, context(key)));
    KV_ASSIGN_OR_RETURN(ValueType type, read_value_type(c, "value type").with_context(context(key)));
    const uint64_t payload_at = c.offset();
    KV_TRY(skip_value(c, type, 0).with_context(context(key)));
    const auto payload = bytes_.subspan(static_cast<size_t>(payload_at),
                                        static_cast<size_t>(c.offset() - payload_at));
    if (!key_index_.emplace(key, metadata_.size()).second) {
      return Error(fmt::format("offset {}: duplicate metadata key {}", entry_at, quoted(key)));
    }
    metadata_.push_back({key, Value(type, payload), entry_at});
  }
  if (const Value* align = find("general.alignment")) {
    auto v = align->type() == ValueType::UINT32 ? align->as_uint() : std::nullopt;
    if (!v || *v == 0 || (*v & (*v - 1)) != 0) {
      return Error(fmt::format("offset {}: general.alignment must be a u32 power of two, found {} {}",
                               metadata_[key_index_.at("general.alignment")].offset,
                               value_type_name(align->type()), align->to_display()));
    }
    alignment_ = static_cast<uint32_t>(*v);
  }
  return {};
}

Status File::parse_tensor_infos(ByteCursor& c, uint64_t count) {
  tensors_.reserve(static_cast<size_t>(count));
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t info_at = c.offset();
    auto context = [&](std::string_view name) {
      return name.empty() ? fmt::format("tensor info #{}", i)
                          : fmt::format("tensor info #{} ({})", i, quoted(name));
    };
    TensorInfo t;
    KV_ASSIGN_OR_RETURN(t.name, read_string(c, "tensor name").with_context(context("")));
    if (t.name.empty()) return Error(fmt::format("offset {}: {} has an empty name", info_at, context("")));
    if (t.name.size() > kMaxTensorName) {
      return Error(fmt::format("offset {}: {} has a name of {} bytes; ggml allows at most {}", info_at,
                               context(t.name), t.name.size(), kMaxTensorName));
    }
    const uint64_t dims_at = c.offset();
    KV_ASSIGN_OR_RETURN(t.n_dims, c.read<uint32_t>("dimension count").with_context(context(t.name)));
    if (t.n_dims == 0 || t.n_dims > kMaxDims) {
      return Error(fmt::format("offset {}: {} has {} dimensions, expected 1 to {}", dims_at,
                               context(t.name), t.n_dims, kMaxDims));
    }
    t.n_elements = 1;
    for (uint32_t d = 0; d < t.n_dims; ++d) {
      const uint64_t dim_at = c.offset();
      KV_ASSIGN_OR_RETURN(t.ne[d], c.read<uint64_t>("dimension").with_context(context(t.name)));
      if (t.ne[d] == 0 || t.ne[d] > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          !checked_mul(t.n_elements, t.ne[d], t.n_elements) ||
          t.n_elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Error(fmt::format("offset {}: {} dimension {} is {}: dimensions must be at least 1 and "
                                 "the element count must stay below 2^63",
                                 dim_at, context(t.name), d, t.ne[d]));
      }
    }
    const uint64_t type_at = c.offset();
    KV_ASSIGN_OR_RETURN(uint32_t raw_type, c.read<uint32_t>("tensor type").with_context(context(t.name)));
    auto traits = ggml_type_traits(raw_type);
    if (!traits) {
      return Error(fmt::format("offset {}: {} has tensor type {}, which is unknown or was removed from ggml",
                               type_at, context(t.name), raw_type));
    }
    t.type = static_cast<GgmlType>(raw_type);
    auto row = ggml_row_bytes(t.type, t.ne[0]);
    if (!row) return Error(fmt::format("offset {}: {}: {}", dims_at, context(t.name), row.error().message()));
    t.n_bytes = *row;
    for (uint32_t d = 1; d < t.n_dims; ++d) {
      if (!checked_mul(t.n_bytes, t.ne[d], t.n_bytes)) {
        return Error(fmt::format("offset {}: {} byte size overflows", dims_at, context(t.name)));
      }
    }
    const uint64_t offset_at = c.offset();
    KV_ASSIGN_OR_RETURN(t.offset, c.read<uint64_t>("tensor data offset").with_context(context(t.name)));
    if (t.offset % alignment_ != 0) {
      return Error(fmt::format("offset {}: {} data offset {} is not a multiple of the alignment {}",
                               offset_at, context(t.name), t.offset, alignment_));
    }
    if (t.offset > std::numeric_limits<uint64_t>::max() - t.n_bytes) {
      return Error(fmt::format("offset {}: {} data offset {} + size {} overflows", offset_at,
                               context(t.name), t.offset, t.n_bytes));
    }
    if (!tensor_index_.emplace(t.name, tensors_.size()).second) {
      return Error(fmt::format("offset {}: duplicate tensor name {}", info_at, quoted(t.name)));
    }
    tensors_.push_back(t);
  }
  return {};
}

Status File::check_data_region() {
  // The data region starts at the next multiple of the alignment after the header.
  data_offset_ = (header_size_ + alignment_ - 1) / alignment_ * alignment_;
  std::vector<const TensorInfo*> by_offset;
  by_offset.reserve(tensors_.size());
  for (const auto& t : tensors_) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
  uint64_t end = 0;
  const TensorInfo* prev = nullptr;
  for (const TensorInfo* t : by_offset) {
    if (prev != nullptr && t->offset < end) {
      return Error(fmt::format("tensor {} (data offset {}) overlaps tensor {} (data offset {}, {} bytes)",
                               quoted(t->name), t->offset, quoted(prev->name), prev->offset, prev->n_bytes));
    }
    end = t->offset + t->n_bytes;
    tensor_bytes_ += t->n_bytes;
    prev = t;
  }
  data_size_ = end;
  auto marker = get_bool(kMetadataOnlyKey);
  const uint64_t file_size = bytes_.size();
  if (marker.value_or(false) && file_size <= data_offset_) {
    metadata_only_ = true;
    return {};
  }
  if (data_size_ > std::numeric_limits<uint64_t>::max() - data_offset_ ||
      data_offset_ + data_size_ > file_size) {
    // Name the first tensor that does not fit.
    for (const TensorInfo* t : by_offset) {
      if (data_offset_ + t->offset + t->n_bytes > file_size) {
        return Error(fmt::format(
            "truncated: tensor data needs {} bytes from offset {} (to offset {}), but the file has {} bytes; "
            "tensor {} at offset {} is incomplete",
            data_size_, data_offset_, data_offset_ + data_size_, file_size, quoted(t->name),
            data_offset_ + t->offset));
      }
    }
  }
  return {};
}

const Value* File::find(std::string_view key) const {
  auto it = key_index_.find(key);
  return it == key_index_.end() ? nullptr : &metadata_[it->second].value;
}

const TensorInfo* File::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

std::optional<uint64_t> File::get_uint(std::string_view key) const {
  const Value* v = find(key);
  return v ? v->as_uint() : std::nullopt;
}

std::optional<double> File::get_float(std::string_view key) const {
  const Value* v = find(key);
  return v ? v->as_float() : std::nullopt;
}

std::optional<bool> File::get_bool(std::string_view key) const {
  const Value* v = find(key);
  return v ? v->as_bool() : std::nullopt;
}

std::optional<std::string_view> File::get_string(std::string_view key) const {
  const Value* v = find(key);
  return v ? v->as_string() : std::nullopt;
}

std::string_view File::architecture() const {
  return get_string("general.architecture").value_or("");
}

std::span<const std::byte> File::tensor_data(const TensorInfo& tensor) const {
  if (metadata_only_) return {};
  return bytes_.subspan(static_cast<size_t>(data_offset_ + tensor.offset), static_cast<size_t>(tensor.n_bytes));
}

}  // namespace kvgate::gguf
