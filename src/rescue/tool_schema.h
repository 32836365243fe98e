// Tool declarations and argument typing for recovered tool calls.
//
// ToolSet indexes a request's OpenAI `tools` array by function name. Malformed entries are
// skipped (they cannot be called). resolve() maps the name a model wrote to a declared tool:
// the exact name, else the name without a "functions."/"function."/"tools."/"tool." prefix,
// else a case-insensitive match when exactly one tool matches. A name matching no declared
// tool resolves to nothing: calls are never invented.
//
// coerce_arguments() brings a call's arguments to the tool's JSON schema where the intended
// value is unambiguous, and reports what it did and what does not fit:
//   string "3" -> 3 for integer, "2.5" -> 2.5 for number, "true"/"False" -> bool for
//   boolean, "null"/"None" -> null for null, JSON (or Python-literal) text -> the value for
//   object/array; 3.0 -> 3 for integer; a number or boolean -> its text for string, an
//   object or array -> its JSON text for string.
// A value that already has an allowed type is left alone (so "3" stays a string when the
// schema allows strings). Types come from `type` (a name or a list), from the branches of
// anyOf/oneOf, or from `enum` values. Nested objects (`properties`) and arrays (`items`) are
// coerced recursively to a bounded depth. Missing required parameters and parameters the
// schema does not declare are reported, not invented or removed.
//
// Everything here is pure and deterministic; nothing throws on any input.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace kvgate::rescue {

// What the rescue noticed or changed, for logs and metrics.
enum class CallIssue {
  kUnknownTool,       // a call names no declared tool: left as text
  kNameNormalized,    // a call's name matched a tool only after normalisation
  kCoerced,           // an argument was converted to the schema's type
  kTypeMismatch,      // an argument does not fit the schema and was left as written
  kMissingRequired,   // a required parameter is absent
  kUnknownParameter,  // an argument the schema does not declare
  kUnterminated,      // a call's closing marker was missing
  kTruncated,         // a call's JSON ended mid-value (left as text unless accepted)
  kRepairedJson,      // a call's JSON needed lenient reading (quotes, literals, commas)
  kInvalidCall,       // a call marker whose body could not be read: left as text
  kTooManyCalls,      // calls beyond the limit were left as text
  kInputTruncated,    // the input was longer than the limit; only its head was read
};

std::string_view call_issue_name(CallIssue issue);

struct CallNote {
  CallIssue issue;
  int call = -1;       // index into the returned tool_calls, -1 when not about a kept call
  std::string detail;  // e.g. the parameter path and the values involved
};

class ToolSet {
 public:
  struct Tool {
    std::string name;
    nlohmann::json parameters;  // the JSON schema of the arguments ({} when none was given)
  };

  // A `parameters` schema nested deeper than 64 levels is treated as absent.
  explicit ToolSet(const nlohmann::json& tools);

  bool empty() const { return tools_.empty(); }
  size_t size() const { return tools_.size(); }

  // The declared tool `name` refers to, or nullptr. `*normalized` (when given) is set when
  // the match needed normalisation.
  const Tool* resolve(std::string_view name, bool* normalized = nullptr) const;

 private:
  std::vector<Tool> tools_;
};

// Coerces `args` (a JSON object) to `schema` (the tool's `parameters`). With
// `values_are_text` the top-level values are raw text from a tag-based format (such as
// <parameter=x>3</parameter>): converting them to the schema's type is decoding, not
// coercion, so it is not reported as kCoerced; a parameter the schema does not type stays
// text. Notes name `call` as their call index.
nlohmann::json coerce_arguments(nlohmann::json args, const nlohmann::json& schema,
                                bool values_are_text, int call, std::vector<CallNote>& notes);

}  // namespace kvgate::rescue
