// JSON text for the wire, the logs, records and the store: compact (or indented by `indent`
// spaces), and never an exception for a string that is not valid UTF-8 (client and model text
// can hold any bytes; invalid sequences become U+FFFD). The one way kvgate dumps JSON: a
// dump() that throws on one client's bytes fails whatever request dumps them next.
#pragma once

#include <string>

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

// json_text of `object` with member `key` set to `value` (added in its sorted place when
// absent), without copying the object: a large request body with another message list.
// REQUIRES: object.is_object().
std::string json_text_with(const nlohmann::json& object, const std::string& key, const nlohmann::json& value);

}  // namespace kvgate::util
