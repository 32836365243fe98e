#include "plan/kv_type.h"

#include <cctype>

#include <fmt/format.h>

namespace kvgate::plan {
namespace {

struct Entry {
  std::string_view name;
  uint32_t block_size;
  uint32_t block_bytes;
  uint32_t row_meta_bytes;
  bool quantized;
  bool ik_only;
};

// Block layouts from ggml's block structs (ggml-common.h) and ik_llama.cpp's q6_0 / q8_KV.
constexpr Entry kEntries[] = {
    {"f32", 1, 4, 0, false, false},     {"f16", 1, 2, 0, false, false},
    {"bf16", 1, 2, 0, false, false},    {"q8_0", 32, 34, 0, true, false},
    {"q4_0", 32, 18, 0, true, false},   {"q4_1", 32, 20, 0, true, false},
    {"iq4_nl", 32, 18, 0, true, false}, {"q5_0", 32, 22, 0, true, false},
    {"q5_1", 32, 24, 0, true, false},   {"q6_0", 32, 26, 0, true, true},
    {"q8_KV", 32, 32, 8, true, true},
};

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  }
  return true;
}

}  // namespace

Result<uint64_t> KvType::row_bytes(uint64_t n) const {
  if (n % block_size != 0) {
    return Error(fmt::format("KV type {} has blocks of {} elements, which do not divide a row of {}", name,
                             block_size, n));
  }
  return n / block_size * block_bytes + row_meta_bytes;
}

std::vector<std::string_view> kv_type_names(Fork fork) {
  std::vector<std::string_view> out;
  for (const auto& e : kEntries) {
    if (!e.ik_only || fork == Fork::kIk) out.push_back(e.name);
  }
  return out;
}

Result<KvType> parse_kv_type(std::string_view name, Fork fork) {
  for (const auto& e : kEntries) {
    if (!iequals(e.name, name)) continue;
    if (e.ik_only && fork != Fork::kIk) {
      return Error(fmt::format("KV cache type '{}' exists only in ik_llama.cpp (use --fork ik); mainline accepts: {}",
                               name, fmt::join(kv_type_names(fork), ", ")));
    }
    return KvType{std::string(e.name), e.block_size, e.block_bytes, e.row_meta_bytes, e.quantized};
  }
  return Error(fmt::format("unknown KV cache type '{}'; {} accepts: {}", name, fork_name(fork),
                           fmt::join(kv_type_names(fork), ", ")));
}

std::vector<std::string_view> kv_types_by_precision(Fork fork) {
  if (fork == Fork::kIk) return {"f16", "q8_0", "q6_0", "q5_1", "q5_0", "q4_1", "q4_0"};
  return {"f16", "q8_0", "q5_1", "q5_0", "q4_1", "q4_0"};
}

}  // namespace kvgate::plan
