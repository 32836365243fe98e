// ggml tensor types: the numbering used in GGUF files and each type's block layout.
//
// Values are the on-disk enum of the pinned llama.cpp release (ggml.h). Numbers whose type
// was removed (4, 5, 31-33, 36-38) are known but have no layout: a tensor using one is
// rejected with a message that says so. Types added by ik_llama.cpp for its KV cache
// (q6_0, q8_KV) are not GGUF tensor types here; the planner knows them by name.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "util/result.h"

namespace kvgate::gguf {

enum class GgmlType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22,
  IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
  TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39, NVFP4 = 40, Q1_0 = 41, Q2_0 = 42,
};

inline constexpr uint32_t kGgmlTypeCount = 43;

struct GgmlTypeTraits {
  std::string_view name;   // as llama.cpp prints it: "f16", "q8_0", "q4_K", ...
  uint32_t block_size;     // elements per block
  uint32_t block_bytes;    // bytes per block
  bool quantized;
};

// Layout of a type; nullopt for numbers that are unknown or were removed from ggml.
std::optional<GgmlTypeTraits> ggml_type_traits(uint32_t raw_type);
inline std::optional<GgmlTypeTraits> ggml_type_traits(GgmlType t) {
  return ggml_type_traits(static_cast<uint32_t>(t));
}
// The type's name; "type#N" for a number without a layout.
std::string ggml_type_name(uint32_t raw_type);
inline std::string ggml_type_name(GgmlType t) { return ggml_type_name(static_cast<uint32_t>(t)); }
// Case-insensitive lookup by name ("Q8_0", "q8_0", "bf16").
std::optional<GgmlType> ggml_type_from_name(std::string_view name);

// Bytes of a row of `n` elements. Error if n is not a multiple of the block size or the
// type has no layout.
Result<uint64_t> ggml_row_bytes(GgmlType type, uint64_t n);

}  // namespace kvgate::gguf
