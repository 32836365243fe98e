// UTF-8 as kvgate meets it from outside: whether bytes are valid UTF-8, and whether an id a
// client sent (a header, a body field, a path) may be kept.
//
// An id a client names is kept in sessions, the session store, saved-state records, logs and
// the status page; bytes that are not UTF-8 or control characters there make trouble far from
// the request that brought them (a JSON dump that throws, a log line cut). Such an id is
// refused where it comes in (client_id_problem), and every JSON dump replaces what is invalid
// anyway (util/json.h).
//
// Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace kvgate::util {

// Length of the valid UTF-8 sequence at `p` (1 to 4), or 0 when the bytes there are not one
// (overlong forms, surrogates and sequences cut by the end included).
// REQUIRES: p < text.size().
size_t utf8_sequence(std::string_view text, size_t p);

bool is_valid_utf8(std::string_view text);
// How many bytes of `text` can be written now: all but a UTF-8 sequence cut by the end (its
// first bytes wait for the rest, at most 3). A writer that converts chunks of a stream keeps
// characters whole with it.
size_t complete_utf8_prefix(std::string_view text);
// UTF-8 → UTF-16 (surrogate pairs past U+FFFF); an invalid sequence becomes U+FFFD.
std::u16string to_utf16(std::string_view utf8);
// `text` with every invalid sequence replaced by U+FFFD.
std::string sanitize_utf8(std::string_view text);

// The longest id kvgate takes from a client (a conversation name, a response id, ...).
inline constexpr size_t kMaxClientIdBytes = 1024;

// What is wrong with `id` as an id from a client, as the end of a sentence ("is not valid
// UTF-8 (byte 0xff at offset 0)", "holds a control character (U+000A at offset 3)", "is
// longer than 1024 bytes"); nullopt when it is acceptable: valid UTF-8 without control
// characters (U+0000-U+001F, U+007F-U+009F), at most `max_bytes` bytes. Empty is acceptable.
std::optional<std::string> client_id_problem(std::string_view id, size_t max_bytes = kMaxClientIdBytes);

}  // namespace kvgate::util
