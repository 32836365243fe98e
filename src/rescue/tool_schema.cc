#include "rescue/tool_schema.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>

#include <fmt/format.h>

#include "rescue/relaxed_json.h"

namespace kvgate::rescue {
namespace {

using nlohmann::json;

constexpr int kMaxDepth = 16;

const json* member(const json& obj, const std::string& key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

enum TypeBit : unsigned {
  kString = 1u << 0,
  kInteger = 1u << 1,
  kNumber = 1u << 2,
  kBoolean = 1u << 3,
  kNull = 1u << 4,
  kObject = 1u << 5,
  kArray = 1u << 6,
};

unsigned type_bit(std::string_view name) {
  if (name == "string") return kString;
  if (name == "integer") return kInteger;
  if (name == "number") return kNumber;
  if (name == "boolean") return kBoolean;
  if (name == "null") return kNull;
  if (name == "object") return kObject;
  if (name == "array") return kArray;
  return 0;
}

unsigned value_bit(const json& v) {
  switch (v.type()) {
    case json::value_t::string: return kString;
    case json::value_t::boolean: return kBoolean;
    case json::value_t::null: return kNull;
    case json::value_t::object: return kObject;
    case json::value_t::array: return kArray;
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return kInteger;
    case json::value_t::number_float: return kNumber;
    default: return 0;
  }
}

std::string type_names(unsigned bits) {
  static constexpr std::pair<unsigned, const char*> kNames[] = {
      {kString, "string"}, {kInteger, "integer"}, {kNumber, "number"}, {kBoolean, "boolean"},
      {kNull, "null"},     {kObject, "object"},   {kArray, "array"}};
  std::string out;
  for (auto [bit, name] : kNames) {
    if (!(bits & bit)) continue;
    if (!out.empty()) out += '|';
    out += name;
  }
  return out;
}

unsigned schema_types(const json& schema, int depth) {
  if (!schema.is_object() || depth > kMaxDepth) return 0;
  unsigned t = 0;
  if (const json* ty = member(schema, "type")) {
    if (ty->is_string()) t |= type_bit(ty->get_ref<const std::string&>());
    if (ty->is_array()) {
      for (const auto& e : *ty) {
        if (e.is_string()) t |= type_bit(e.get_ref<const std::string&>());
      }
    }
  }
  for (const char* key : {"anyOf", "oneOf"}) {
    const json* branches = member(schema, key);
    if (!branches || !branches->is_array()) continue;
    for (const auto& b : *branches) t |= schema_types(b, depth + 1);
  }
  if (t == 0) {
    if (const json* e = member(schema, "enum"); e && e->is_array()) {
      for (const auto& v : *e) t |= value_bit(v);
    } else if (const json* c = member(schema, "const")) {
      t |= value_bit(*c);
    } else if (member(schema, "properties")) {
      t = kObject;
    } else if (member(schema, "items")) {
      t = kArray;
    }
  }
  return t;
}

bool fits(unsigned allowed, const json& v) {
  unsigned b = value_bit(v);
  return (allowed & b) || (b == kInteger && (allowed & kNumber));
}

std::string_view trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t' || s[b] == '\n' || s[b] == '\r')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t' || s[e - 1] == '\n' || s[e - 1] == '\r')) --e;
  return s.substr(b, e - b);
}

std::optional<json> integer_from_double(double d) {
  if (!std::isfinite(d) || d != std::floor(d)) return std::nullopt;
  if (d < -9.2e18 || d > 9.2e18) return std::nullopt;
  return json(static_cast<int64_t>(d));
}

std::optional<json> parse_integer(std::string_view s) {
  if (!s.empty() && s[0] == '+') s.remove_prefix(1);
  if (s.empty()) return std::nullopt;
  int64_t i = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), i);
  if (ec == std::errc() && p == s.data() + s.size()) return json(i);
  double d = 0;
  auto [q, ec2] = std::from_chars(s.data(), s.data() + s.size(), d);
  if (ec2 == std::errc() && q == s.data() + s.size()) return integer_from_double(d);
  return std::nullopt;
}

std::optional<json> parse_number(std::string_view s) {
  if (auto strict = parse_strict_json(s); strict && strict->is_number()) return strict;
  if (!s.empty() && s[0] == '+') s.remove_prefix(1);
  double d = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), d);
  if (ec == std::errc() && p == s.data() + s.size() && !s.empty() && std::isfinite(d)) return json(d);
  return std::nullopt;
}

// A whole-text JSON (or Python literal) value of the given kind.
std::optional<json> parse_structured(std::string_view s, json::value_t want) {
  auto v = parse_relaxed_value(s, 0, {});
  if (!v.ok()) return std::nullopt;
  if (!trim(s.substr(v->end)).empty() || v->value.type() != want) return std::nullopt;
  return std::move(v->value);
}

// The value `s` (text) denotes under `allowed`, trying the types in a fixed order.
std::optional<json> from_text(std::string_view raw, unsigned allowed) {
  std::string_view s = trim(raw);
  if (allowed & kInteger) {
    if (auto v = parse_integer(s)) return v;
  }
  if (allowed & kNumber) {
    if (auto v = parse_number(s)) return v;
  }
  if (allowed & kBoolean) {
    if (s == "true" || s == "True" || s == "TRUE") return json(true);
    if (s == "false" || s == "False" || s == "FALSE") return json(false);
  }
  if ((allowed & kNull) && (s == "null" || s == "None")) return json(nullptr);
  if (allowed & kObject) {
    if (auto v = parse_structured(s, json::value_t::object)) return v;
  }
  if (allowed & kArray) {
    if (auto v = parse_structured(s, json::value_t::array)) return v;
  }
  return std::nullopt;
}

std::string shown(const json& v) {
  std::string s = dump_json(v);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return sanitize_utf8(s);
}

class Coercer {
 public:
  Coercer(int call, std::vector<CallNote>& notes) : call_(call), notes_(notes) {}

  json coerce(json v, const json& schema, const std::string& path, bool text, int depth) {
    if (depth > kMaxDepth) return v;
    unsigned allowed = schema_types(schema, 0);
    if (allowed == 0 || fits(allowed, v)) {
      if (!in_enum(schema, v)) note(CallIssue::kTypeMismatch, fmt::format("{}: {} is not one of the enum values", path, shown(v)));
      return descend(std::move(v), schema, path, depth);
    }
    std::optional<json> converted;
    if (v.is_string()) {
      converted = from_text(v.get_ref<const std::string&>(), allowed);
    } else if ((v.is_number() || v.is_boolean() || v.is_object() || v.is_array()) && (allowed & kString)) {
      converted = json(dump_json(v));
    } else if (v.is_number_float() && (allowed & kInteger)) {
      converted = integer_from_double(v.get<double>());
    }
    if (!converted || !in_enum(schema, *converted)) return mismatch(std::move(v), allowed, path);
    if (!text) {
      note(CallIssue::kCoerced, fmt::format("{}: {} -> {}", path, shown(v),
                                            converted->is_string() ? "string" : shown(*converted)));
    }
    return descend(std::move(*converted), schema, path, depth);
  }

  void note(CallIssue issue, std::string detail) {
    notes_.push_back(CallNote{issue, call_, std::move(detail)});
  }

 private:
  static bool in_enum(const json& schema, const json& v) {
    const json* e = member(schema, "enum");
    if (!e || !e->is_array()) return true;
    for (const auto& x : *e) {
      if (x == v) return true;
    }
    return false;
  }

  json mismatch(json v, unsigned allowed, const std::string& path) {
    note(CallIssue::kTypeMismatch,
         fmt::format("{}: expected {}, got {}", path, type_names(allowed), shown(v)));
    return v;
  }

  json descend(json v, const json& schema, const std::string& path, int depth) {
    if (v.is_object()) {
      const json* props = member(schema, "properties");
      if (!props || !props->is_object()) return v;
      for (auto& [key, child] : v.items()) {
        if (const json* sub = member(*props, key)) {
          child = coerce(std::move(child), *sub, path + "." + key, false, depth + 1);
        }
      }
    } else if (v.is_array()) {
      const json* items = member(schema, "items");
      if (!items || !items->is_object()) return v;
      for (size_t i = 0; i < v.size(); ++i) {
        v[i] = coerce(std::move(v[i]), *items, fmt::format("{}[{}]", path, i), false, depth + 1);
      }
    }
    return v;
  }

  int call_;
  std::vector<CallNote>& notes_;
};

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

}  // namespace

std::string_view call_issue_name(CallIssue issue) {
  switch (issue) {
    case CallIssue::kUnknownTool: return "unknown_tool";
    case CallIssue::kNameNormalized: return "name_normalized";
    case CallIssue::kCoerced: return "coerced";
    case CallIssue::kTypeMismatch: return "type_mismatch";
    case CallIssue::kMissingRequired: return "missing_required";
    case CallIssue::kUnknownParameter: return "unknown_parameter";
    case CallIssue::kUnterminated: return "unterminated";
    case CallIssue::kTruncated: return "truncated";
    case CallIssue::kRepairedJson: return "repaired_json";
    case CallIssue::kInvalidCall: return "invalid_call";
    case CallIssue::kTooManyCalls: return "too_many_calls";
    case CallIssue::kInputTruncated: return "input_truncated";
  }
  return "unknown";
}

ToolSet::ToolSet(const json& tools) {
  if (!tools.is_array()) return;
  for (const auto& entry : tools) {
    const json* fn = member(entry, "function");
    const json& decl = (fn && fn->is_object()) ? *fn : entry;
    const json* name = member(decl, "name");
    if (!name || !name->is_string() || name->get_ref<const std::string&>().empty()) continue;
    const std::string& n = name->get_ref<const std::string&>();
    bool duplicate = false;
    for (const auto& t : tools_) duplicate = duplicate || t.name == n;
    if (duplicate) continue;
    const json* params = member(decl, "parameters");
    // A schema nested deeper than the coercion looks is not copied (copies recurse).
    bool usable = params && params->is_object() && json_depth_within(*params, 64);
    tools_.push_back(Tool{n, usable ? *params : json::object()});
  }
}

const ToolSet::Tool* ToolSet::resolve(std::string_view name, bool* normalized) const {
  if (normalized) *normalized = false;
  for (const auto& t : tools_) {
    if (t.name == name) return &t;
  }
  std::string_view bare = name;
  for (std::string_view prefix : {"functions.", "function.", "tools.", "tool."}) {
    if (bare.substr(0, prefix.size()) == prefix) {
      bare.remove_prefix(prefix.size());
      break;
    }
  }
  bare = trim(bare);
  const Tool* found = nullptr;
  for (const auto& t : tools_) {
    if (t.name == bare) found = &t;
  }
  if (!found) {
    std::string want = lower(bare);
    for (const auto& t : tools_) {
      if (lower(t.name) != want) continue;
      if (found) return nullptr;  // ambiguous
      found = &t;
    }
  }
  if (found && normalized) *normalized = true;
  return found;
}

json coerce_arguments(json args, const json& schema, bool values_are_text, int call,
                      std::vector<CallNote>& notes) {
  if (!args.is_object()) return args;
  Coercer c(call, notes);
  const json* props = member(schema, "properties");
  for (auto& [key, value] : args.items()) {
    const json* sub = (props && props->is_object()) ? member(*props, key) : nullptr;
    if (sub) {
      value = c.coerce(std::move(value), *sub, key, values_are_text, 1);
    } else if (props && props->is_object()) {
      c.note(CallIssue::kUnknownParameter, key);
    }
  }
  if (const json* required = member(schema, "required"); required && required->is_array()) {
    for (const auto& r : *required) {
      if (r.is_string() && !args.contains(r.get_ref<const std::string&>())) {
        c.note(CallIssue::kMissingRequired, r.get<std::string>());
      }
    }
  }
  return args;
}

}  // namespace kvgate::rescue
