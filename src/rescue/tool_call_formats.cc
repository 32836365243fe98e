#include "rescue/tool_call_formats.h"

#include <optional>

#include "rescue/relaxed_json.h"

namespace kvgate::rescue::formats {
namespace {

using nlohmann::json;

constexpr size_t kMaxCallsPerBody = 256;
constexpr size_t kMaxParameters = 512;

const json* member(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

bool looks_like_schema(const json& v) {
  const json* type = member(v, "type");
  const json* props = member(v, "properties");
  return type && type->is_string() && *type == "object" && props && props->is_object();
}

// Arguments as written: an object, a JSON (or lenient) string holding one, empty or null.
std::optional<json> read_arguments(const json& v, bool& relaxed) {
  if (v.is_object()) return v;
  if (v.is_null()) return json::object();
  if (!v.is_string()) return std::nullopt;
  std::string_view s = trim(v.get_ref<const std::string&>());
  if (s.empty()) return json::object();
  auto parsed = parse_relaxed_value(s, 0, {});
  if (!parsed.ok() || !trim(s.substr(parsed->end)).empty() || !parsed->value.is_object()) {
    return std::nullopt;
  }
  relaxed = relaxed || parsed->relaxed;
  return std::move(parsed->value);
}

std::optional<RawCall> call_from_object(const json& o, bool require_arguments, int depth) {
  if (!o.is_object() || depth > 2) return std::nullopt;
  if (const json* fn = member(o, "function"); fn && fn->is_object()) {
    return call_from_object(*fn, false, depth + 1);
  }
  const json* name = nullptr;
  for (const char* key : {"name", "function", "tool", "tool_name"}) {
    const json* n = member(o, key);
    if (n && n->is_string()) {
      name = n;
      break;
    }
  }
  if (!name || trim(name->get_ref<const std::string&>()).empty()) return std::nullopt;
  const json* args = nullptr;
  const char* args_key = nullptr;
  for (const char* key : {"arguments", "parameters", "args", "input", "params"}) {
    if ((args = member(o, key))) {
      args_key = key;
      break;
    }
  }
  if (!args && require_arguments) return std::nullopt;
  // A tool declaration echoed back ({"name", "description", "parameters": {schema}}).
  if (args && std::string_view(args_key) == "parameters" && looks_like_schema(*args) &&
      member(o, "description")) {
    return std::nullopt;
  }
  RawCall call;
  call.name = std::string(trim(name->get_ref<const std::string&>()));
  if (args) {
    auto a = read_arguments(*args, call.relaxed);
    if (!a) return std::nullopt;
    call.arguments = std::move(*a);
  }
  return call;
}

void collect(const json& v, bool require_arguments, std::vector<RawCall>& out, int depth) {
  if (depth > 3 || out.size() >= kMaxCallsPerBody) return;
  if (v.is_array()) {
    for (const auto& e : v) collect(e, require_arguments, out, depth + 1);
    return;
  }
  if (const json* tc = member(v, "tool_calls"); tc && tc->is_array()) {
    for (const auto& e : *tc) collect(e, false, out, depth + 1);
    return;
  }
  if (auto call = call_from_object(v, require_arguments, 0)) out.push_back(std::move(*call));
}

// Removes a ``` fence (with its language line) around `s`.
std::string_view strip_fence(std::string_view s) {
  s = trim(s);
  if (s.substr(0, 3) != "```") return s;
  size_t nl = s.find('\n');
  s = nl == std::string_view::npos ? std::string_view() : s.substr(nl + 1);
  s = trim(s);
  if (s.size() >= 3 && s.substr(s.size() - 3) == "```") s = trim(s.substr(0, s.size() - 3));
  return s;
}

std::string_view strip_one_newline(std::string_view v) {
  if (v.substr(0, 2) == "\r\n") {
    v.remove_prefix(2);
  } else if (!v.empty() && v.front() == '\n') {
    v.remove_prefix(1);
  }
  if (v.size() >= 2 && v.substr(v.size() - 2) == "\r\n") {
    v.remove_suffix(2);
  } else if (!v.empty() && v.back() == '\n') {
    v.remove_suffix(1);
  }
  return v;
}

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-';
}

bool is_ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }

}  // namespace

std::string_view trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && is_space(s[b])) ++b;
  while (e > b && is_space(s[e - 1])) --e;
  return s.substr(b, e - b);
}

size_t Finder::next(size_t from) {
  if (valid_ && (cached_ == std::string_view::npos || cached_ >= from)) return cached_;
  cached_ = from > text_.size() ? std::string_view::npos : text_.find(needle_, from);
  valid_ = true;
  return cached_;
}

std::vector<RawCall> calls_from_json(const json& value, bool require_arguments) {
  std::vector<RawCall> out;
  collect(value, require_arguments, out, 0);
  return out;
}

BodyRead read_json_calls(std::string_view body, bool allow_truncated, bool require_arguments) {
  BodyRead r;
  std::string_view inner = strip_fence(body);
  size_t start = inner.find_first_of("{[");
  if (start == std::string_view::npos) {
    r.error = "no JSON object in the call";
    return r;
  }
  auto parsed = parse_relaxed_value(inner, start, {.allow_truncated = allow_truncated});
  if (!parsed.ok()) {
    r.error = parsed.error().message();
    return r;
  }
  r.calls = calls_from_json(parsed->value, require_arguments);
  if (r.calls.empty()) {
    r.error = "the JSON is not a call (no \"name\")";
    return r;
  }
  r.relaxed = parsed->relaxed;
  for (const auto& c : r.calls) r.relaxed = r.relaxed || c.relaxed;
  r.truncated = parsed->truncated;
  std::string leftover(trim(inner.substr(0, start)));
  std::string_view after = trim(inner.substr(parsed->end));
  if (!after.empty()) leftover += (leftover.empty() ? "" : "\n") + std::string(after);
  r.leftover = std::move(leftover);
  return r;
}

BodyRead read_xml_functions(std::string_view body) {
  static constexpr std::string_view kFunction = "<function=";
  static constexpr std::string_view kFunctionEnd = "</function>";
  static constexpr std::string_view kParam = "<parameter=";
  static constexpr std::string_view kParamEnd = "</parameter>";
  BodyRead r;
  Finder fn_open(body, kFunction), fn_close(body, kFunctionEnd), p_open(body, kParam),
      p_close(body, kParamEnd), gt(body, ">");
  size_t p = 0;
  std::string leftover;
  while (r.calls.size() < kMaxCallsPerBody) {
    size_t f = fn_open.next(p);
    if (f == std::string_view::npos) break;
    leftover += body.substr(p, f - p);
    size_t name_end = gt.next(f + kFunction.size());
    if (name_end == std::string_view::npos) {  // cut inside the name
      p = f;
      r.truncated = true;
      break;
    }
    RawCall call;
    call.values_are_text = true;
    call.name = std::string(trim(body.substr(f + kFunction.size(), name_end - f - kFunction.size())));
    size_t q = name_end + 1;
    size_t close = fn_close.next(q);
    size_t next_fn = fn_open.next(q);
    size_t region_end = std::min({close, next_fn, body.size()});
    bool closed = close != std::string_view::npos && close == region_end;
    size_t params = 0;
    while (params++ < kMaxParameters) {
      size_t ps = p_open.next(q);
      if (ps == std::string_view::npos || ps >= region_end) break;
      size_t key_end = gt.next(ps + kParam.size());
      if (key_end == std::string_view::npos || key_end >= region_end) break;
      std::string key(trim(body.substr(ps + kParam.size(), key_end - ps - kParam.size())));
      size_t v_begin = key_end + 1;
      size_t pe = p_close.next(v_begin);
      size_t next_ps = p_open.next(v_begin);
      size_t v_end;
      if (pe != std::string_view::npos && pe < region_end && (next_ps == std::string_view::npos || pe < next_ps)) {
        v_end = pe;
        q = pe + kParamEnd.size();
      } else {
        v_end = std::min(next_ps, region_end);
        q = v_end;
        r.unterminated = true;
      }
      call.arguments[sanitize_utf8(key)] =
          sanitize_utf8(strip_one_newline(body.substr(v_begin, v_end - v_begin)));
    }
    if (!closed) {
      r.unterminated = true;
      if (q < region_end) leftover += body.substr(q, region_end - q);
    }
    r.calls.push_back(std::move(call));
    p = closed ? region_end + kFunctionEnd.size() : region_end;
  }
  if (r.calls.empty()) {
    r.error = "no complete <function=...> block";
    return r;
  }
  leftover += body.substr(std::min(p, body.size()));
  r.leftover = std::string(trim(leftover));
  return r;
}

BodyRead read_python_calls(std::string_view body, bool allow_truncated) {
  BodyRead r;
  std::string_view s = trim(body);
  size_t p = 0;
  auto skip = [&] {
    while (p < s.size() && is_space(s[p])) ++p;
  };
  auto fail = [&](std::string why) {
    r.calls.clear();
    r.error = std::move(why);
    return r;
  };
  const bool bracket = !s.empty() && s[0] == '[';
  if (bracket) ++p;
  bool list_closed = !bracket;
  while (r.calls.size() < kMaxCallsPerBody) {
    skip();
    if (p >= s.size()) break;
    if (bracket && s[p] == ']') {
      ++p;
      list_closed = true;
      break;
    }
    size_t name_start = p;
    if (!is_ident_start(s[p])) return fail("expected a function name");
    while (p < s.size() && is_name_char(s[p])) ++p;
    RawCall call;
    call.name = std::string(s.substr(name_start, p - name_start));
    skip();
    if (p >= s.size()) return fail("cut before '('");
    if (s[p] != '(') return fail("expected '(' after the function name");
    ++p;
    bool call_closed = false;
    while (!r.truncated) {
      skip();
      if (p >= s.size()) break;
      if (s[p] == ')') {
        ++p;
        call_closed = true;
        break;
      }
      // keyword=value or a positional value
      size_t k = p;
      while (k < s.size() && (is_ident_start(s[k]) || (k > p && s[k] >= '0' && s[k] <= '9'))) ++k;
      size_t eq = k;
      while (eq < s.size() && is_space(s[eq])) ++eq;
      std::string key;
      if (k > p && eq < s.size() && s[eq] == '=' && (eq + 1 >= s.size() || s[eq + 1] != '=')) {
        key = std::string(s.substr(p, k - p));
        p = eq + 1;
      }
      auto v = parse_relaxed_value(s, p, {.allow_truncated = allow_truncated});
      if (!v.ok()) return fail(v.error().message());
      r.truncated = v->truncated;
      if (key.empty()) {
        call.positional.push_back(std::move(v->value));
      } else {
        call.arguments[key] = std::move(v->value);
      }
      p = v->end;
      skip();
      if (p < s.size() && s[p] == ',') ++p;
    }
    if (!call_closed && !r.truncated) {
      if (!allow_truncated) return fail("cut inside a call");
      r.truncated = true;
    }
    r.calls.push_back(std::move(call));
    if (!bracket || r.truncated) break;
    skip();
    if (p < s.size() && s[p] == ',') ++p;
  }
  if (r.calls.empty()) return fail("no call in the list");
  if (!list_closed && !r.truncated) r.unterminated = true;
  r.leftover = std::string(trim(s.substr(std::min(p, s.size()))));
  return r;
}

}  // namespace kvgate::rescue::formats
