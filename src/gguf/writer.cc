#include "gguf/writer.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <fstream>
#include <future>
#include <thread>

#include <fmt/format.h>

#include "gguf/file.h"

namespace kvgate::gguf {
namespace {

template <typename T>
void put(std::vector<std::byte>& out, T v) {
  const auto* p = reinterpret_cast<const std::byte*>(&v);
  out.insert(out.end(), p, p + sizeof(T));
}

void put_string(std::vector<std::byte>& out, std::string_view s) {
  put<uint64_t>(out, s.size());
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  out.insert(out.end(), p, p + s.size());
}

template <typename T>
std::vector<std::byte> encode_array(ValueType elem, std::span<const T> values) {
  std::vector<std::byte> out;
  put<uint32_t>(out, static_cast<uint32_t>(elem));
  put<uint64_t>(out, values.size());
  for (const T& v : values) put<T>(out, v);
  return out;
}

uint64_t align_up(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

}  // namespace

Status Writer::add_entry(std::string_view key, ValueType type, std::vector<std::byte> payload) {
  if (key.empty()) return Error("metadata key must not be empty");
  if (has_key(key)) return Error(fmt::format("duplicate metadata key '{}'", key));
  if (key == "general.alignment") {
    uint32_t a = 0;
    if (type != ValueType::UINT32 || payload.size() != 4) return Error("general.alignment must be a u32");
    std::memcpy(&a, payload.data(), 4);
    if (a == 0 || (a & (a - 1)) != 0) return Error("general.alignment must be a power of two");
    if (!tensors_.empty()) return Error("general.alignment must be set before tensors are added");
  }
  entries_.push_back({std::string(key), type, std::move(payload)});
  return {};
}

bool Writer::has_key(std::string_view key) const {
  for (const auto& e : entries_) {
    if (e.key == key) return true;
  }
  return false;
}

Status Writer::add_u32(std::string_view key, uint32_t v) {
  std::vector<std::byte> p;
  put(p, v);
  return add_entry(key, ValueType::UINT32, std::move(p));
}
Status Writer::add_i32(std::string_view key, int32_t v) {
  std::vector<std::byte> p;
  put(p, v);
  return add_entry(key, ValueType::INT32, std::move(p));
}
Status Writer::add_u64(std::string_view key, uint64_t v) {
  std::vector<std::byte> p;
  put(p, v);
  return add_entry(key, ValueType::UINT64, std::move(p));
}
Status Writer::add_f32(std::string_view key, float v) {
  std::vector<std::byte> p;
  put(p, v);
  return add_entry(key, ValueType::FLOAT32, std::move(p));
}
Status Writer::add_bool(std::string_view key, bool v) {
  std::vector<std::byte> p;
  put<uint8_t>(p, v ? 1 : 0);
  return add_entry(key, ValueType::BOOL, std::move(p));
}
Status Writer::add_string(std::string_view key, std::string_view v) {
  std::vector<std::byte> p;
  put_string(p, v);
  return add_entry(key, ValueType::STRING, std::move(p));
}
Status Writer::add_u32_array(std::string_view key, std::span<const uint32_t> v) {
  return add_entry(key, ValueType::ARRAY, encode_array(ValueType::UINT32, v));
}
Status Writer::add_i32_array(std::string_view key, std::span<const int32_t> v) {
  return add_entry(key, ValueType::ARRAY, encode_array(ValueType::INT32, v));
}
Status Writer::add_f32_array(std::string_view key, std::span<const float> v) {
  return add_entry(key, ValueType::ARRAY, encode_array(ValueType::FLOAT32, v));
}
Status Writer::add_bool_array(std::string_view key, std::span<const bool> v) {
  std::vector<std::byte> p;
  put<uint32_t>(p, static_cast<uint32_t>(ValueType::BOOL));
  put<uint64_t>(p, v.size());
  for (bool b : v) put<uint8_t>(p, b ? 1 : 0);
  return add_entry(key, ValueType::ARRAY, std::move(p));
}
Status Writer::add_string_array(std::string_view key, std::span<const std::string> v) {
  std::vector<std::byte> p;
  put<uint32_t>(p, static_cast<uint32_t>(ValueType::STRING));
  put<uint64_t>(p, v.size());
  for (const auto& s : v) put_string(p, s);
  return add_entry(key, ValueType::ARRAY, std::move(p));
}
Status Writer::add_value(std::string_view key, const Value& value) {
  return add_raw(key, value.type(), value.payload());
}
Status Writer::add_raw(std::string_view key, ValueType type, std::span<const std::byte> payload) {
  return add_entry(key, type, std::vector<std::byte>(payload.begin(), payload.end()));
}

uint32_t Writer::alignment() const {
  for (const auto& e : entries_) {
    if (e.key == "general.alignment") {
      uint32_t a = 0;
      std::memcpy(&a, e.payload.data(), 4);
      return a;
    }
  }
  return kDefaultAlignment;
}

Status Writer::add_tensor(std::string_view name, GgmlType type, std::vector<uint64_t> ne, TensorFill fill) {
  if (name.empty() || name.size() > kMaxTensorName) {
    return Error(fmt::format("tensor name '{}' must have 1 to {} bytes", name, kMaxTensorName));
  }
  for (const auto& t : tensors_) {
    if (t.name == name) return Error(fmt::format("duplicate tensor name '{}'", name));
  }
  if (ne.empty() || ne.size() > kMaxDims) {
    return Error(fmt::format("tensor '{}' has {} dimensions, expected 1 to {}", name, ne.size(), kMaxDims));
  }
  KV_ASSIGN_OR_RETURN(uint64_t bytes, ggml_row_bytes(type, ne[0]).with_context(fmt::format("tensor '{}'", name)));
  for (size_t d = 0; d < ne.size(); ++d) {
    if (ne[d] == 0) return Error(fmt::format("tensor '{}' dimension {} is 0", name, d));
    if (d > 0) bytes *= ne[d];
  }
  uint64_t offset = 0;
  if (!tensors_.empty()) {
    const auto& last = tensors_.back();
    offset = align_up(last.offset + last.n_bytes, alignment());
  }
  tensors_.push_back({std::string(name), type, std::move(ne), bytes, offset, std::move(fill)});
  return {};
}

uint64_t Writer::tensor_bytes() const {
  uint64_t total = 0;
  for (const auto& t : tensors_) total += t.n_bytes;
  return total;
}

std::vector<std::byte> Writer::encode_header(bool metadata_only) const {
  std::vector<std::byte> out;
  out.insert(out.end(), {std::byte{'G'}, std::byte{'G'}, std::byte{'U'}, std::byte{'F'}});
  put<uint32_t>(out, 3);
  put<uint64_t>(out, tensors_.size());
  const bool add_marker = metadata_only && !has_key(kMetadataOnlyKey);
  put<uint64_t>(out, entries_.size() + (add_marker ? 1 : 0));
  for (const auto& e : entries_) {
    put_string(out, e.key);
    put<uint32_t>(out, static_cast<uint32_t>(e.type));
    out.insert(out.end(), e.payload.begin(), e.payload.end());
  }
  if (add_marker) {
    put_string(out, kMetadataOnlyKey);
    put<uint32_t>(out, static_cast<uint32_t>(ValueType::BOOL));
    put<uint8_t>(out, 1);
  }
  for (const auto& t : tensors_) {
    put_string(out, t.name);
    put<uint32_t>(out, static_cast<uint32_t>(t.ne.size()));
    for (uint64_t d : t.ne) put<uint64_t>(out, d);
    put<uint32_t>(out, static_cast<uint32_t>(t.type));
    put<uint64_t>(out, t.offset);
  }
  return out;
}

// Fills run on worker threads, up to one tensor per core and about kFillAheadBytes ahead of
// the tensor being written; tensors are written in order, so the file holds the same bytes as
// a fill on one thread (each fill owns its random stream). A 27B model's random weights take
// minutes on one core and seconds on sixteen.
void Writer::write_tensor_data(std::ofstream& f, uint64_t data_start, uint64_t& pos,
                               const std::function<void(uint64_t)>& pad_to) const {
  constexpr uint64_t kFillAheadBytes = 4ULL << 30;
  const size_t max_ahead = std::max(1U, std::thread::hardware_concurrency());
  std::deque<std::future<std::vector<std::byte>>> pending;
  size_t next = 0;
  uint64_t ahead_bytes = 0;
  for (const auto& t : tensors_) {
    while (next < tensors_.size() &&
           (pending.empty() || (pending.size() < max_ahead && ahead_bytes + tensors_[next].n_bytes <= kFillAheadBytes))) {
      const Tensor& n = tensors_[next++];
      ahead_bytes += n.n_bytes;
      pending.push_back(std::async(std::launch::async, [&n] {
        std::vector<std::byte> buffer(static_cast<size_t>(n.n_bytes), std::byte{0});
        if (n.fill) n.fill(buffer);
        return buffer;
      }));
    }
    const std::vector<std::byte> buffer = pending.front().get();
    pending.pop_front();
    ahead_bytes -= t.n_bytes;
    pad_to(data_start + t.offset);
    f.write(reinterpret_cast<const char*>(buffer.data()), static_cast<std::streamsize>(buffer.size()));
    pos += t.n_bytes;
  }
}

Status Writer::write(const std::filesystem::path& path, bool metadata_only) const {
  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return Error(fmt::format("cannot create '{}'", tmp.string()));
    const std::vector<std::byte> header = encode_header(metadata_only);
    f.write(reinterpret_cast<const char*>(header.data()), static_cast<std::streamsize>(header.size()));
    if (!metadata_only) {
      const uint32_t a = alignment();
      uint64_t pos = header.size();
      std::vector<std::byte> zeros(a, std::byte{0});
      const std::function<void(uint64_t)> pad_to = [&](uint64_t target) {
        f.write(reinterpret_cast<const char*>(zeros.data()), static_cast<std::streamsize>(target - pos));
        pos = target;
      };
      const uint64_t data_start = align_up(pos, a);
      pad_to(data_start);
      write_tensor_data(f, data_start, pos, pad_to);
      // Pad the end so the last tensor's region is aligned like the engine's own writer does.
      pad_to(align_up(pos, a));
    }
    f.flush();
    if (!f) return Error(fmt::format("writing '{}' failed (disk full?)", tmp.string()));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Error(fmt::format("cannot rename '{}' to '{}': {}", tmp.string(), path.string(), ec.message()));
  return {};
}

}  // namespace kvgate::gguf
