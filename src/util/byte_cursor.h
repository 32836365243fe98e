// ByteCursor: bounds-checked, little-endian reading over a byte span.
//
// Every read either succeeds and advances, or fails without advancing and returns an Error
// naming the absolute offset, what was expected and how many bytes were left. There is no
// sticky failure state and nothing reads past the span. Offsets are absolute: a cursor over
// a sub-span reports offsets relative to the start of the whole buffer (`base_offset`).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

#include "util/result.h"

namespace kvgate::util {

static_assert(std::endian::native == std::endian::little, "kvgate assumes a little-endian host");

class ByteCursor {
 public:
  explicit ByteCursor(std::span<const std::byte> data, uint64_t base_offset = 0)
      : data_(data), base_(base_offset) {}

  // Absolute offset of the next byte to read.
  uint64_t offset() const { return base_ + pos_; }
  size_t remaining() const { return data_.size() - pos_; }
  bool at_end() const { return pos_ == data_.size(); }

  template <typename T>
  Result<T> read(std::string_view what) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (remaining() < sizeof(T)) return short_read(what, sizeof(T));
    T value;
    std::memcpy(&value, data_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }

  // Returns the next `n` bytes as a view and advances past them.
  Result<std::span<const std::byte>> bytes(uint64_t n, std::string_view what) {
    if (remaining() < n) return short_read(what, n);
    auto view = data_.subspan(pos_, static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return view;
  }

  Status skip(uint64_t n, std::string_view what) {
    if (remaining() < n) return short_read(what, n);
    pos_ += static_cast<size_t>(n);
    return {};
  }

  // An error located at the current offset.
  Error error_here(std::string_view message) const {
    return Error("offset " + std::to_string(offset()) + ": " + std::string(message));
  }

 private:
  Error short_read(std::string_view what, uint64_t n) const {
    return Error("offset " + std::to_string(offset()) + ": expected " + std::string(what) + " (" +
                 std::to_string(n) + " bytes), but the data ends at offset " +
                 std::to_string(base_ + data_.size()) + " (" + std::to_string(remaining()) +
                 " bytes left)");
  }

  std::span<const std::byte> data_;
  uint64_t base_;
  size_t pos_ = 0;
};

}  // namespace kvgate::util
