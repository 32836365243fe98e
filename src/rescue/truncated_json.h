// Closing JSON that was cut short, for history repair: when `text` is a strict-JSON document
// cut short, close_truncated_json() returns the text with the shortest tail that makes it
// valid (an incomplete final token is cut back first), leaving every complete byte as it was:
// `{"a": 1, "b": "x` becomes `{"a": 1, "b": "x"}`. Text with a syntax error before its end is
// not "merely truncated" and gives nullopt. (parse_relaxed_value() with allow_truncated is
// the value-level counterpart, relaxed_json.h.)
//
// Work is linear in the text; nesting deeper than 512 gives nullopt. Pure; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace kvgate::rescue {

// See above. REQUIRES nothing; returns nullopt for valid, empty or broken text.
std::optional<std::string> close_truncated_json(std::string_view text);

}  // namespace kvgate::rescue
