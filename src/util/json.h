// JSON text for the wire and the logs: compact, and never an exception for a string that is
// not valid UTF-8 (client and model text can hold any bytes; invalid sequences become U+FFFD).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace kvgate::util {

inline std::string json_text(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// The same for JSON that keeps its keys in insertion order (client requests and answers
// whose key order reaches the engine's prompt).
inline std::string json_text(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

// json_text of `object` with member `key` set to `value` (added in its sorted place when
// absent), without copying the object: a large request body with another message list.
// REQUIRES: object.is_object().
std::string json_text_with(const nlohmann::json& object, const std::string& key, const nlohmann::json& value);

}  // namespace kvgate::util
