// GGUF metadata values, as views into the bytes of a parsed file.
//
// A Value is a typed view of one encoded value (its payload, after the type tag). The parser
// validates every payload completely before it hands out a Value, so the accessors below
// decode without further checks. A Value is only valid while the gguf::File that produced
// it is alive.
//
// Encoding (little-endian): scalars are their fixed-width bytes; a string is a uint64 byte
// length followed by the bytes; an array is a uint32 element type, a uint64 count and the
// elements encoded back to back (elements may themselves be arrays).
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kvgate::gguf {

enum class ValueType : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};
inline constexpr uint32_t kValueTypeCount = 13;

// "u32", "string", "array", ... ; "type#N" for unknown numbers.
std::string value_type_name(ValueType type);
bool is_known_value_type(uint32_t raw);
// Encoded size of a fixed-width type; 0 for STRING and ARRAY.
size_t fixed_value_size(ValueType type);

class Value;

// Forward iteration over the elements of an array Value.
class ArrayIterator {
 public:
  using iterator_category = std::forward_iterator_tag;
  using value_type = Value;
  using difference_type = std::ptrdiff_t;
  using pointer = void;
  using reference = Value;

  ArrayIterator() = default;
  ArrayIterator(ValueType element_type, const std::byte* pos, uint64_t index)
      : element_type_(element_type), pos_(pos), index_(index) {}

  Value operator*() const;
  ArrayIterator& operator++();
  ArrayIterator operator++(int) { auto copy = *this; ++*this; return copy; }
  bool operator==(const ArrayIterator& other) const { return index_ == other.index_; }

 private:
  ValueType element_type_ = ValueType::UINT8;
  const std::byte* pos_ = nullptr;
  uint64_t index_ = 0;
};

class Value {
 public:
  Value() = default;
  // REQUIRES: `payload` is a complete, validated encoding of a value of `type`.
  Value(ValueType type, std::span<const std::byte> payload) : type_(type), payload_(payload) {}

  ValueType type() const { return type_; }
  // The encoded bytes after the type tag; copying them reproduces the value exactly.
  std::span<const std::byte> payload() const { return payload_; }

  bool is_integer() const;
  bool is_float() const { return type_ == ValueType::FLOAT32 || type_ == ValueType::FLOAT64; }
  bool is_string() const { return type_ == ValueType::STRING; }
  bool is_array() const { return type_ == ValueType::ARRAY; }

  // Integer value if this is an integer type and the value is representable.
  std::optional<uint64_t> as_uint() const;
  std::optional<int64_t> as_int() const;
  // Float or integer value as double.
  std::optional<double> as_float() const;
  std::optional<bool> as_bool() const;
  std::optional<std::string_view> as_string() const;

  // Arrays. For a non-array, element_type() is UINT8 and size() is 0.
  ValueType element_type() const;
  uint64_t size() const;
  ArrayIterator begin() const;
  ArrayIterator end() const;
  // Elements of an integer / numeric / string array; nullopt if the elements are not of
  // that kind.
  std::optional<std::vector<int64_t>> as_int_array() const;
  std::optional<std::vector<double>> as_float_array() const;
  std::optional<std::vector<std::string_view>> as_string_array() const;

  // Short human-readable rendering: scalars in full, strings quoted and cut at
  // `max_chars`, arrays as "[u32 × 48: 4, 4, 4, ...]".
  std::string to_display(size_t max_chars = 80) const;

 private:
  ValueType type_ = ValueType::UINT8;
  std::span<const std::byte> payload_;
};

}  // namespace kvgate::gguf
