// Lenient JSON for text a model wrote: the building block of tool-call rescue and history
// repair.
//
// parse_relaxed_value() reads one value the way a forgiving reader would: strict JSON, plus
// the slips models make: single-quoted strings, bare (identifier) object keys, Python
// literals True/False/None, trailing commas, raw control characters inside strings, a '+'
// before a number and Python \xHH escapes. Every string it returns is valid UTF-8 (invalid
// bytes and lone surrogates become U+FFFD), so the value can always be dumped. Nesting is
// limited to `max_depth`; work is linear in the bytes read.
//
// With `allow_truncated`, input that ends inside the value is closed instead of rejected: an
// open string keeps what it has (a cut escape is dropped), a member or element that had not
// started its value is dropped, and open containers are closed; `truncated` says so.
//
// close_truncated_json() (truncated_json.h) is the text-level counterpart for history repair;
// it and the UTF-8 helpers (utf8.h) are included here for the callers of this header.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "rescue/truncated_json.h"
#include "rescue/utf8.h"
#include "util/result.h"

namespace kvgate::rescue {

struct RelaxedOptions {
  bool allow_truncated = false;
  size_t max_depth = 64;
};

struct RelaxedValue {
  nlohmann::json value;
  size_t end = 0;          // offset just past the value (text.size() when truncated)
  bool relaxed = false;    // syntax beyond strict JSON was accepted
  bool truncated = false;  // the input ended inside the value and it was closed
};

// Parses one value starting at `pos` (leading whitespace is skipped). Errors name the offset
// and what was expected.
Result<RelaxedValue> parse_relaxed_value(std::string_view text, size_t pos = 0,
                                         const RelaxedOptions& options = {});

// Strict parse without exceptions: the value, or nullopt when `text` is not one JSON document.
std::optional<nlohmann::json> parse_strict_json(std::string_view text);

// dump() that cannot throw: invalid UTF-8 in strings is replaced. Copying, comparing and
// dumping nlohmann values recurse once per nesting level: code that handles client JSON
// checks json_depth_within() before doing so with values of unknown depth.
std::string dump_json(const nlohmann::json& value);

// Whether `value` nests no deeper than `max_depth` containers (checked without recursion).
bool json_depth_within(const nlohmann::json& value, size_t max_depth);

}  // namespace kvgate::rescue
