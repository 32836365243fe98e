#include "util/json.h"

namespace kvgate::util {

std::string json_text_with(const nlohmann::json& object, const std::string& key, const nlohmann::json& value) {
  std::string out = "{";
  bool first = true;
  auto member = [&](const std::string& k, const nlohmann::json& v) {
    if (!first) out += ',';
    first = false;
    out += json_text(nlohmann::json(k));
    out += ':';
    out += json_text(v);
  };
  bool placed = false;
  // nlohmann::json keeps members sorted by key (std::map), as dump() writes them.
  for (auto it = object.begin(); it != object.end(); ++it) {
    if (!placed && !(it.key() < key)) {
      member(key, value);
      placed = true;
      if (it.key() == key) continue;
    }
    member(it.key(), it.value());
  }
  if (!placed) member(key, value);
  out += '}';
  return out;
}

}  // namespace kvgate::util
