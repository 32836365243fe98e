#include "upstream/slot_listing.h"

namespace kvgate::gateway {
namespace {

using nlohmann::json;

json numbers_only(const json& obj, bool top) {
  json out = json::object();
  for (const auto& [key, value] : obj.items()) {
    if (value.is_number() || value.is_boolean()) {
      out[key] = value;
    } else if (top && key == "model" && value.is_string()) {
      out[key] = value;
    } else if (value.is_object()) {
      json inner = numbers_only(value, false);
      if (!inner.empty()) out[key] = std::move(inner);
    }
  }
  return out;
}

}  // namespace

json slots_without_content(const json& slots) {
  json out = json::array();
  if (!slots.is_array()) return out;
  for (const auto& slot : slots) {
    if (slot.is_object()) out.push_back(numbers_only(slot, true));
  }
  return out;
}

}  // namespace kvgate::gateway
