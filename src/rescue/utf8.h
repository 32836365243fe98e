// UTF-8 and the hex digits of escapes, for the readers of text models and clients write
// (relaxed_json.h, truncated_json.h) and for whatever must be dumped as JSON.
//
// Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "util/utf8.h"

namespace kvgate::rescue {

// The value of the `n` hex digits at `p` (\uXXXX, \xHH escapes); -1 when any is missing or
// not hex.
long read_hex(std::string_view text, size_t p, size_t n);

// Appends code point `cp` as UTF-8; a surrogate or a value past U+10FFFF becomes U+FFFD.
void append_utf8(std::string& out, uint32_t cp);

// Validity and repair of UTF-8 live in util (utf8.h), where the edge checks clients' ids too.
using util::is_valid_utf8;
using util::sanitize_utf8;
using util::utf8_sequence;

}  // namespace kvgate::rescue
