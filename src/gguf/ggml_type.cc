#include "gguf/ggml_type.h"

#include <array>
#include <cctype>
#include <string>

namespace kvgate::gguf {
namespace {

// Block layouts from the release's ggml-common.h block structs (QK_K = 256).
constexpr std::array<GgmlTypeTraits, kGgmlTypeCount> kTraits = [] {
  std::array<GgmlTypeTraits, kGgmlTypeCount> t{};
  auto set = [&t](GgmlType type, std::string_view name, uint32_t block, uint32_t bytes, bool q) {
    t[static_cast<uint32_t>(type)] = {name, block, bytes, q};
  };
  set(GgmlType::F32, "f32", 1, 4, false);
  set(GgmlType::F16, "f16", 1, 2, false);
  set(GgmlType::Q4_0, "q4_0", 32, 18, true);
  set(GgmlType::Q4_1, "q4_1", 32, 20, true);
  set(GgmlType::Q5_0, "q5_0", 32, 22, true);
  set(GgmlType::Q5_1, "q5_1", 32, 24, true);
  set(GgmlType::Q8_0, "q8_0", 32, 34, true);
  set(GgmlType::Q8_1, "q8_1", 32, 36, true);
  set(GgmlType::Q2_K, "q2_K", 256, 84, true);
  set(GgmlType::Q3_K, "q3_K", 256, 110, true);
  set(GgmlType::Q4_K, "q4_K", 256, 144, true);
  set(GgmlType::Q5_K, "q5_K", 256, 176, true);
  set(GgmlType::Q6_K, "q6_K", 256, 210, true);
  set(GgmlType::Q8_K, "q8_K", 256, 292, true);
  set(GgmlType::IQ2_XXS, "iq2_xxs", 256, 66, true);
  set(GgmlType::IQ2_XS, "iq2_xs", 256, 74, true);
  set(GgmlType::IQ3_XXS, "iq3_xxs", 256, 98, true);
  set(GgmlType::IQ1_S, "iq1_s", 256, 50, true);
  set(GgmlType::IQ4_NL, "iq4_nl", 32, 18, true);
  set(GgmlType::IQ3_S, "iq3_s", 256, 110, true);
  set(GgmlType::IQ2_S, "iq2_s", 256, 82, true);
  set(GgmlType::IQ4_XS, "iq4_xs", 256, 136, true);
  set(GgmlType::I8, "i8", 1, 1, false);
  set(GgmlType::I16, "i16", 1, 2, false);
  set(GgmlType::I32, "i32", 1, 4, false);
  set(GgmlType::I64, "i64", 1, 8, false);
  set(GgmlType::F64, "f64", 1, 8, false);
  set(GgmlType::IQ1_M, "iq1_m", 256, 56, true);
  set(GgmlType::BF16, "bf16", 1, 2, false);
  set(GgmlType::TQ1_0, "tq1_0", 256, 54, true);
  set(GgmlType::TQ2_0, "tq2_0", 256, 66, true);
  set(GgmlType::MXFP4, "mxfp4", 32, 17, true);
  set(GgmlType::NVFP4, "nvfp4", 64, 36, true);
  set(GgmlType::Q1_0, "q1_0", 128, 18, true);
  set(GgmlType::Q2_0, "q2_0", 64, 18, true);
  return t;
}();

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::optional<GgmlTypeTraits> ggml_type_traits(uint32_t raw_type) {
  if (raw_type >= kGgmlTypeCount || kTraits[raw_type].block_size == 0) return std::nullopt;
  return kTraits[raw_type];
}

std::string ggml_type_name(uint32_t raw_type) {
  if (auto t = ggml_type_traits(raw_type)) return std::string(t->name);
  return "type#" + std::to_string(raw_type);
}

std::optional<GgmlType> ggml_type_from_name(std::string_view name) {
  for (uint32_t i = 0; i < kGgmlTypeCount; ++i) {
    if (kTraits[i].block_size != 0 && iequals(kTraits[i].name, name)) return static_cast<GgmlType>(i);
  }
  return std::nullopt;
}

Result<uint64_t> ggml_row_bytes(GgmlType type, uint64_t n) {
  auto traits = ggml_type_traits(type);
  if (!traits) return Error("tensor type " + ggml_type_name(type) + " has no known layout");
  if (n % traits->block_size != 0) {
    return Error("a row of " + std::to_string(n) + " elements is not a multiple of " +
                 std::string(traits->name) + "'s block size " + std::to_string(traits->block_size));
  }
  return n / traits->block_size * traits->block_bytes;
}

}  // namespace kvgate::gguf
