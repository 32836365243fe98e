// Request bodies (and other data: compressed traces) sent compressed (`Content-Encoding: gzip | deflate |
// zstd`, as Codex and other clients may send them), decoded before any handler sees them.
//
// The decoded size is bounded as the received one is: decoding stops as soon as the output
// passes `max_bytes`, so a small body that would expand to gigabytes (a decompression bomb)
// costs at most max_bytes of memory and is answered 413. Codings listed together
// ("gzip, zstd") were applied in that order and are undone in reverse; at most four.
// `identity` is skipped. Anything else is 415. Corrupt or truncated data is 400.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "util/result.h"

namespace kvgate::http {

struct CodingError {
  int status = 400;  // 400 corrupt, 413 too large once decoded, 415 unknown coding
  std::string message;
};

// Decodes `body` sent with the Content-Encoding header value `encoding` (case-insensitive
// tokens, comma-separated). Returns the body as sent before encoding. Messages say what was
// wrong with the data ("gzip data is truncated"); the caller names what the data was.
Result<std::string, CodingError> decode_content(std::string_view encoding, std::string body,
                                                size_t max_bytes);

}  // namespace kvgate::http
