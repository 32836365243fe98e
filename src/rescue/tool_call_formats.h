// Readers for the body of each tool-call format, used by tool_call_parse.cc.
//
// Each reader gets the text between a call's markers (or a candidate JSON text) and returns
// the calls written there, unvalidated: names as written, arguments as JSON. Text inside the
// body that is not part of a call comes back as `leftover`. Readers never throw; work is
// linear in the body (finds are monotonic, see Finder).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace kvgate::rescue::formats {

struct RawCall {
  std::string name;
  nlohmann::json arguments = nlohmann::json::object();
  std::vector<nlohmann::json> positional;  // Python positional arguments, mapped later
  bool values_are_text = false;            // <parameter=...> values: typed by the schema
  bool relaxed = false;                    // the arguments needed lenient JSON
};

struct BodyRead {
  std::vector<RawCall> calls;  // empty: the body is not a call (see `error`)
  std::string leftover;        // non-call text inside the body
  bool relaxed = false;        // lenient JSON was needed
  bool truncated = false;      // the JSON ended mid-value and was closed
  bool unterminated = false;   // a </function> or list end was missing
  std::string error;
};

// A JSON call object, a list of them or {"tool_calls": [...]}, optionally in a ``` fence and
// after some prose. `allow_truncated` closes JSON cut off at the end of the body;
// `require_arguments` as for calls_from_json.
BodyRead read_json_calls(std::string_view body, bool allow_truncated, bool require_arguments = false);

// One or more <function=NAME><parameter=KEY>VALUE</parameter>...</function> blocks.
BodyRead read_xml_functions(std::string_view body);

// Python calls: [f(a=1, b="x"), g()] or a single f(a=1).
BodyRead read_python_calls(std::string_view body, bool allow_truncated);

// The calls a parsed JSON value denotes (see read_json_calls). With `require_arguments`
// (prose scanning) an object needs an arguments-like key to count as a call.
std::vector<RawCall> calls_from_json(const nlohmann::json& value, bool require_arguments);

// Finds `needle` in `text` at or after increasing positions, scanning each byte once: a
// result is reused while the query position has not passed it.
class Finder {
 public:
  Finder(std::string_view text, std::string_view needle) : text_(text), needle_(needle) {}
  // REQUIRES: `from` never decreases between calls.
  size_t next(size_t from);

 private:
  std::string_view text_;
  std::string_view needle_;
  size_t cached_ = 0;
  bool valid_ = false;
};

std::string_view trim(std::string_view s);

}  // namespace kvgate::rescue::formats
