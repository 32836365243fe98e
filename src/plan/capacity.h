// How much text a context holds, per kind of text. Token density depends on the language
// and the layout; the figures are the field measurements kvgate's users reported for
// Qwen-family tokenizers (DOMAIN.md: English ≈ 4 characters per token, Chinese prose
// ≈ 0.595, Chinese numbered lists 0.654–0.747). They are estimates for planning, not a
// tokenizer.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace kvgate::plan {

struct TextCapacity {
  std::string_view kind;         // "english_prose", "chinese_prose", "chinese_lists"
  std::string_view description;  // for people
  double chars_per_token_low = 0;
  double chars_per_token_high = 0;
  uint64_t chars_low = 0;        // characters `tokens` tokens hold
  uint64_t chars_high = 0;
};

std::vector<TextCapacity> text_capacity(uint64_t tokens);

}  // namespace kvgate::plan
