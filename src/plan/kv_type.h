// KV cache element types: the values llama-server accepts for -ctk / -ctv and their sizes.
//
// Mainline accepts exactly f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1;
// ik_llama.cpp adds q6_0 (32-element blocks of 26 bytes) and q8_KV (32 bytes per 32
// elements plus 8 bytes of metadata per row). Sizes follow ggml's block layouts: a row of n
// elements takes n / block_size blocks, so n must be a multiple of the block size (the
// engines refuse a quantized K type whose block does not divide the head dimension).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "plan/server_settings.h"
#include "util/result.h"

namespace kvgate::plan {

struct KvType {
  std::string name;             // as the engines print it: "f16", "q8_0", "q8_KV"
  uint32_t block_size = 1;      // elements per block
  uint32_t block_bytes = 2;     // bytes per block
  uint32_t row_meta_bytes = 0;  // extra bytes per row (ik q8_KV: 8)
  bool quantized = false;

  // Bytes of one row of `n` elements. Error if n is not a multiple of the block size.
  Result<uint64_t> row_bytes(uint64_t n) const;
};

// The -ctk/-ctv values `fork` accepts, in the engine's spelling.
std::vector<std::string_view> kv_type_names(Fork fork);

// Looks up a -ctk/-ctv value (case-insensitive). The error lists what the fork accepts.
Result<KvType> parse_kv_type(std::string_view name, Fork fork);

// Candidates for `--ctk auto`, highest precision first: f16, q8_0, (ik: q6_0,) q5_1, q5_0,
// q4_1, q4_0.
std::vector<std::string_view> kv_types_by_precision(Fork fork);

}  // namespace kvgate::plan
