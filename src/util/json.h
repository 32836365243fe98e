// JSON text for the wire, the logs, records and the store: compact (or indented by `indent`
// spaces), and never an exception for a string that is not valid UTF-8 (client and model text
// can hold any bytes; invalid sequences become U+FFFD). The one way kvgate dumps JSON: a
// dump() that throws on one client's bytes fails whatever request dumps them next.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace kvgate::util {

inline std::string json_text(const nlohmann::json& j, int indent = -1) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

// The same for JSON that keeps its keys in insertion order (client requests and answers
// whose key order reaches the engine's prompt).
inline std::string json_text(const nlohmann::ordered_json& j, int indent = -1) {
  return j.dump(indent, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

// A member of an object given as JSON text already written: `text` stands for the object's
// own value of `key` (for instance keys in the order a client wrote them, which nlohmann::json
// keeps sorted). Empty text: the object's own value is written.
struct WrittenMember {
  std::string_view key;
  std::string_view text;
};

// json_text of `object` with member `key` set to `value` (added in its sorted place when
// absent), without copying the object: a large request body with another message list.
// `written`, when its key is present in the object, is written as its text.
// REQUIRES: object.is_object(); written.text, when not empty, valid JSON text.
std::string json_text_with(const nlohmann::json& object, const std::string& key, const nlohmann::json& value,
                           WrittenMember written = {});

// json_text of `object` with `written` as above. REQUIRES: object.is_object().
std::string json_text_with(const nlohmann::json& object, WrittenMember written);

// One past the closing quote of the JSON string that opens at text[quote] (a '"'), its
// escapes skipped; npos when the text ends inside it. For linear scans of JSON text.
size_t json_string_end(std::string_view text, size_t quote);

// The text of the value of member `key` of the JSON object `text` (its last occurrence, as a
// parser that keeps the last of repeated keys reads it), found by a linear scan without
// parsing; nullopt when the object has no such member written with exactly these bytes (a key
// written with escapes is not found) or the text is not one whole object (cut short, or
// members out of shape). Unchecked beyond that: parse what it returns.
std::optional<std::string_view> member_text(std::string_view text, std::string_view key);

}  // namespace kvgate::util
