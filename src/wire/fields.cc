#include "wire/fields.h"

#include <cmath>

#include "util/utf8.h"

namespace kvgate::wire {

std::string child_path(std::string_view parent, std::string_view key) {
  if (parent.empty()) return std::string(key);
  std::string out(parent);
  out += '.';
  out += key;
  return out;
}

std::string child_path(std::string_view parent, size_t index) {
  return child_path(parent, std::to_string(index));
}

std::string_view json_kind(const ClientJson& value) {
  switch (value.type()) {
    case ClientJson::value_t::null:
      return "null";
    case ClientJson::value_t::object:
      return "an object";
    case ClientJson::value_t::array:
      return "an array";
    case ClientJson::value_t::string:
      return "a string";
    case ClientJson::value_t::boolean:
      return "a boolean";
    case ClientJson::value_t::binary:
      return "binary data";
    case ClientJson::value_t::discarded:
      return "nothing";
    default:
      return "a number";
  }
}

WireResult<Fields> Fields::of(const ClientJson& value, std::string path) {
  if (!value.is_object()) {
    return invalid_request(path, "expected an object, got " + std::string(json_kind(value)));
  }
  return Fields(value, std::move(path));
}

WireError Fields::error(std::string_view key, const std::string& what) const {
  return invalid_request(path_of(key), what);
}

const ClientJson* Fields::find(std::string_view key) const {
  auto it = object_->find(key);
  if (it == object_->end() || it->is_null()) return nullptr;
  return &*it;
}

WireResult<std::string> Fields::string(std::string_view key) const {
  KV_ASSIGN_OR_RETURN(auto value, optional_string(key));
  if (!value) return error(key, "required");
  return std::move(*value);
}

WireResult<std::optional<std::string>> Fields::optional_string(std::string_view key) const {
  const ClientJson* v = find(key);
  if (v == nullptr) return std::optional<std::string>();
  if (!v->is_string()) return error(key, "expected a string, got " + std::string(json_kind(*v)));
  return std::optional<std::string>(v->get<std::string>());
}

WireResult<std::optional<std::string>> Fields::optional_id(std::string_view key) const {
  KV_ASSIGN_OR_RETURN(auto value, optional_string(key));
  if (value) {
    if (auto problem = util::client_id_problem(*value)) {
      return error(key, "an id that " + *problem + ": an id must be valid UTF-8 without control characters, at most " +
                            std::to_string(util::kMaxClientIdBytes) + " bytes");
    }
  }
  return value;
}

WireResult<std::optional<double>> Fields::optional_number(std::string_view key) const {
  const ClientJson* v = find(key);
  if (v == nullptr) return std::optional<double>();
  if (!v->is_number()) return error(key, "expected a number, got " + std::string(json_kind(*v)));
  return std::optional<double>(v->get<double>());
}

WireResult<std::optional<int64_t>> Fields::optional_integer(std::string_view key, int64_t min) const {
  const ClientJson* v = find(key);
  if (v == nullptr) return std::optional<int64_t>();
  if (!v->is_number()) return error(key, "expected an integer, got " + std::string(json_kind(*v)));
  const double d = v->get<double>();
  if (std::floor(d) != d || d < static_cast<double>(min) || d > 9.0e15) {
    return error(key, "expected a whole number of at least " + std::to_string(min));
  }
  return std::optional<int64_t>(static_cast<int64_t>(d));
}

WireResult<std::optional<bool>> Fields::optional_bool(std::string_view key) const {
  const ClientJson* v = find(key);
  if (v == nullptr) return std::optional<bool>();
  if (!v->is_boolean()) return error(key, "expected a boolean, got " + std::string(json_kind(*v)));
  return std::optional<bool>(v->get<bool>());
}

WireResult<const ClientJson*> Fields::array(std::string_view key) const {
  KV_ASSIGN_OR_RETURN(const ClientJson* v, optional_array(key));
  if (v == nullptr) return error(key, "required");
  return v;
}

WireResult<const ClientJson*> Fields::optional_array(std::string_view key) const {
  const ClientJson* v = find(key);
  if (v != nullptr && !v->is_array())
    return error(key, "expected an array, got " + std::string(json_kind(*v)));
  return v;
}

WireResult<const ClientJson*> Fields::optional_object(std::string_view key) const {
  const ClientJson* v = find(key);
  if (v != nullptr && !v->is_object())
    return error(key, "expected an object, got " + std::string(json_kind(*v)));
  return v;
}

void Fields::list_unknown(std::initializer_list<std::string_view> known,
                          std::vector<std::string>& ignored) const {
  for (const auto& [key, value] : object_->items()) {
    if (value.is_null()) continue;
    bool is_known = false;
    for (std::string_view k : known) is_known = is_known || k == key;
    if (!is_known) ignored.push_back(path_of(key));
  }
}

std::string join_texts(const std::vector<std::string>& texts) {
  std::string out;
  for (size_t i = 0; i < texts.size(); ++i) {
    if (i > 0) out += "\n\n";
    out += texts[i];
  }
  return out;
}

}  // namespace kvgate::wire
