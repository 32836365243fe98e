#include "gguf/value.h"

#include <cstring>
#include <limits>

#include <fmt/format.h>

namespace kvgate::gguf {
namespace {

template <typename T>
T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

constexpr size_t kArrayHeader = sizeof(uint32_t) + sizeof(uint64_t);

// Encoded size of the value starting at p (payload only). Valid for validated data.
size_t encoded_size(ValueType type, const std::byte* p) {
  if (size_t fixed = fixed_value_size(type); fixed != 0) return fixed;
  if (type == ValueType::STRING) return sizeof(uint64_t) + static_cast<size_t>(load<uint64_t>(p));
  // ARRAY
  const auto elem = static_cast<ValueType>(load<uint32_t>(p));
  const uint64_t count = load<uint64_t>(p + sizeof(uint32_t));
  if (size_t fixed = fixed_value_size(elem); fixed != 0) return kArrayHeader + static_cast<size_t>(count) * fixed;
  size_t total = kArrayHeader;
  const std::byte* q = p + kArrayHeader;
  for (uint64_t i = 0; i < count; ++i) {
    const size_t n = encoded_size(elem, q);
    q += n;
    total += n;
  }
  return total;
}

}  // namespace

std::string value_type_name(ValueType type) {
  static constexpr std::string_view kNames[] = {"u8",  "i8",   "u16",    "i16",   "u32", "i32", "f32",
                                                "bool", "string", "array", "u64", "i64", "f64"};
  const auto raw = static_cast<uint32_t>(type);
  if (raw < kValueTypeCount) return std::string(kNames[raw]);
  return "type#" + std::to_string(raw);
}

bool is_known_value_type(uint32_t raw) { return raw < kValueTypeCount; }

size_t fixed_value_size(ValueType type) {
  switch (type) {
    case ValueType::UINT8: case ValueType::INT8: case ValueType::BOOL: return 1;
    case ValueType::UINT16: case ValueType::INT16: return 2;
    case ValueType::UINT32: case ValueType::INT32: case ValueType::FLOAT32: return 4;
    case ValueType::UINT64: case ValueType::INT64: case ValueType::FLOAT64: return 8;
    case ValueType::STRING: case ValueType::ARRAY: return 0;
  }
  return 0;
}

Value ArrayIterator::operator*() const {
  return Value(element_type_, {pos_, encoded_size(element_type_, pos_)});
}

ArrayIterator& ArrayIterator::operator++() {
  pos_ += encoded_size(element_type_, pos_);
  ++index_;
  return *this;
}

bool Value::is_integer() const {
  switch (type_) {
    case ValueType::UINT8: case ValueType::INT8: case ValueType::UINT16: case ValueType::INT16:
    case ValueType::UINT32: case ValueType::INT32: case ValueType::UINT64: case ValueType::INT64:
      return true;
    default:
      return false;
  }
}

std::optional<int64_t> Value::as_int() const {
  const std::byte* p = payload_.data();
  switch (type_) {
    case ValueType::UINT8: return load<uint8_t>(p);
    case ValueType::INT8: return load<int8_t>(p);
    case ValueType::UINT16: return load<uint16_t>(p);
    case ValueType::INT16: return load<int16_t>(p);
    case ValueType::UINT32: return load<uint32_t>(p);
    case ValueType::INT32: return load<int32_t>(p);
    case ValueType::INT64: return load<int64_t>(p);
    case ValueType::UINT64: {
      const auto v = load<uint64_t>(p);
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
      return static_cast<int64_t>(v);
    }
    default: return std::nullopt;
  }
}

std::optional<uint64_t> Value::as_uint() const {
  if (type_ == ValueType::UINT64) return load<uint64_t>(payload_.data());
  auto v = as_int();
  if (!v || *v < 0) return std::nullopt;
  return static_cast<uint64_t>(*v);
}

std::optional<double> Value::as_float() const {
  if (type_ == ValueType::FLOAT32) return load<float>(payload_.data());
  if (type_ == ValueType::FLOAT64) return load<double>(payload_.data());
  if (type_ == ValueType::UINT64) return static_cast<double>(load<uint64_t>(payload_.data()));
  if (auto v = as_int()) return static_cast<double>(*v);
  return std::nullopt;
}

std::optional<bool> Value::as_bool() const {
  if (type_ != ValueType::BOOL) return std::nullopt;
  return load<uint8_t>(payload_.data()) != 0;
}

std::optional<std::string_view> Value::as_string() const {
  if (type_ != ValueType::STRING) return std::nullopt;
  const auto len = static_cast<size_t>(load<uint64_t>(payload_.data()));
  return std::string_view(reinterpret_cast<const char*>(payload_.data() + sizeof(uint64_t)), len);
}

ValueType Value::element_type() const {
  if (type_ != ValueType::ARRAY) return ValueType::UINT8;
  return static_cast<ValueType>(load<uint32_t>(payload_.data()));
}

uint64_t Value::size() const {
  if (type_ != ValueType::ARRAY) return 0;
  return load<uint64_t>(payload_.data() + sizeof(uint32_t));
}

ArrayIterator Value::begin() const {
  if (type_ != ValueType::ARRAY) return {};
  return ArrayIterator(element_type(), payload_.data() + kArrayHeader, 0);
}

ArrayIterator Value::end() const {
  if (type_ != ValueType::ARRAY) return {};
  return ArrayIterator(element_type(), nullptr, size());
}

std::optional<std::vector<int64_t>> Value::as_int_array() const {
  if (!is_array()) return std::nullopt;
  if (!Value(element_type(), {}).is_integer() && element_type() != ValueType::BOOL) return std::nullopt;
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(size()));
  for (Value v : *this) {
    if (auto b = v.as_bool()) {
      out.push_back(*b ? 1 : 0);
    } else if (auto i = v.as_int()) {
      out.push_back(*i);
    } else {
      return std::nullopt;
    }
  }
  return out;
}

std::optional<std::vector<double>> Value::as_float_array() const {
  if (!is_array()) return std::nullopt;
  std::vector<double> out;
  out.reserve(static_cast<size_t>(size()));
  for (Value v : *this) {
    auto f = v.as_float();
    if (!f) return std::nullopt;
    out.push_back(*f);
  }
  return out;
}

std::optional<std::vector<std::string_view>> Value::as_string_array() const {
  if (!is_array() || element_type() != ValueType::STRING) return std::nullopt;
  std::vector<std::string_view> out;
  out.reserve(static_cast<size_t>(size()));
  for (Value v : *this) out.push_back(*v.as_string());
  return out;
}

namespace {

std::string quote_cut(std::string_view s, size_t max_chars) {
  std::string out = "\"";
  size_t shown = 0;
  for (char c : s) {
    if (shown >= max_chars) {
      out += "…";
      break;
    }
    if (c == '\n') {
      out += "\\n";
    } else if (c == '"') {
      out += "\\\"";
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    } else {
      out += c;
    }
    ++shown;
  }
  return out + "\"";
}

std::string scalar_display(const Value& v, size_t max_chars) {
  if (auto b = v.as_bool()) return *b ? "true" : "false";
  if (v.type() == ValueType::UINT64) return std::to_string(*v.as_uint());
  if (auto i = v.as_int()) return std::to_string(*i);
  if (v.type() == ValueType::FLOAT32) return fmt::format("{:g}", *v.as_float());
  if (v.type() == ValueType::FLOAT64) return fmt::format("{:g}", *v.as_float());
  if (auto s = v.as_string()) return quote_cut(*s, max_chars);
  return "?";
}

}  // namespace

std::string Value::to_display(size_t max_chars) const {
  if (!is_array()) return scalar_display(*this, max_chars);
  std::string out = fmt::format("[{} × {}", value_type_name(element_type()), size());
  if (size() == 0) return out + "]";
  out += ": ";
  size_t shown = 0;
  for (Value v : *this) {
    if (shown > 0) out += ", ";
    if (out.size() > max_chars || shown == 8) {
      out += "...";
      break;
    }
    out += v.is_array() ? v.to_display(max_chars / 2) : scalar_display(v, 24);
    ++shown;
  }
  return out + "]";
}

}  // namespace kvgate::gguf
