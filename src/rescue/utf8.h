// UTF-8 and the hex digits of escapes, for the readers of text models and clients write
// (relaxed_json.h, truncated_json.h) and for whatever must be dumped as JSON.
//
// Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kvgate::rescue {

// The value of the `n` hex digits at `p` (\uXXXX, \xHH escapes); -1 when any is missing or
// not hex.
long read_hex(std::string_view text, size_t p, size_t n);

// Appends code point `cp` as UTF-8; a surrogate or a value past U+10FFFF becomes U+FFFD.
void append_utf8(std::string& out, uint32_t cp);

// Length of the valid UTF-8 sequence at `p` (1 to 4), or 0 when the bytes there are not one
// (overlong forms, surrogates and sequences cut by the end included).
size_t utf8_sequence(std::string_view text, size_t p);

bool is_valid_utf8(std::string_view text);
// `text` with every invalid sequence replaced by U+FFFD.
std::string sanitize_utf8(std::string_view text);

}  // namespace kvgate::rescue
