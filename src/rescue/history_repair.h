// History repair: a pure transform of a chat request's `messages` and `tools` that removes
// what makes llama-server reject a conversation, so one malformed turn cannot wedge every
// later request of an agent.
//
// What the pinned engine (80fb11a) rejects, and the repair (docs/RESCUE.md has the table and
// tests/fixtures/history_faults/ the recorded requests and answers):
//   tool_calls[].function.arguments not JSON (500 "Failed to parse tool call arguments as
//     JSON", every template that reads arguments as an object)
//       ""/whitespace -> "{}"; cut off -> closed (`{"a": 1, "b": "x` -> `{"a": 1, "b": "x"}`);
//       lenient JSON (single quotes, trailing comma, True/None) -> the strict rewrite;
//       anything else -> {"_raw": "<the text>"}
//   arguments JSON but not an object (template error in Qwen3-Coder/Qwen3.5: `|items`)
//       a JSON string holding an object -> that object's text; null -> "{}"; else -> _raw
//   arguments missing (500 key 'arguments' not found) -> "{}"; JSON null -> "{}"
//   tool call id null or not a string (500) -> a number's text, else removed (the engine
//     accepts calls without ids; their results then match by position)
//   tool call type missing or not "function" (500) -> "function"
//   tool call without a function name (500) -> the call is dropped
//   tool_calls an object (500) -> [object]; a scalar -> removed
//   tool message tool_call_id null (500) -> removed; not a string -> its text
//   reasoning_content / name null (500) -> removed; not a string -> its text
//   content an object or scalar (400) -> its JSON text; array parts without "type" (400) ->
//     text parts; an array that is not parts -> its JSON text
//   assistant message with neither content nor tool_calls (400) -> content ""
//   tool result with no earlier tool call at all (gpt-oss template error), or whose id
//     matches no earlier call -> a user message "[tool result for <id>]\n<content>"
//   tools: description null or not a string (500) -> "" / its text; type missing (500) ->
//     "function"; flat {"name", "parameters"} without "function" (500) -> wrapped; no name,
//     not an object, or a non-function type (500) -> the tool is dropped
// Opt-in (the engine accepts these with most templates; some templates raise):
//   convert_late_system_messages  system message after the first position -> user (Qwen3.5)
//   drop_empty_assistant_turns    assistant turn with no text, reasoning or calls -> dropped
//
// Stability contract (the gateway relies on it for a byte-stable prompt prefix):
//   * deterministic: the same input gives the same output, every turn;
//   * prefix-stable: the repair of messages[i] depends only on messages[0..i] and nothing
//     after, so repairing a longer conversation leaves the repaired prefix unchanged;
//   * minimal: a well-formed message is returned as it came (valid arguments strings are
//     kept byte for byte, never re-serialised); a request with nothing to repair comes back
//     equal to its input with no repairs.
// Pure: no I/O, no clock, no randomness; never throws on any JSON input. Non-object messages
// and messages without a role are left for the request validator to reject. The inputs are
// taken by value and repaired in place (move them in to avoid a copy); a value nested deeper
// than kRepairMaxDepth is never copied or serialised (that would recurse once per level) and
// is left as it came.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace kvgate::rescue {

enum class RepairKind {
  kArgumentsEmpty,        // "" -> "{}"
  kArgumentsClosed,       // truncated JSON closed
  kArgumentsRelaxed,      // lenient JSON rewritten as strict JSON
  kArgumentsWrapped,      // not usable as JSON: {"_raw": text}
  kArgumentsNotObject,    // JSON but not an object: unwrapped or replaced
  kArgumentsMissing,      // no arguments: "{}"
  kCallIdFixed,           // id null / not a string
  kCallTypeSet,           // type missing / not "function"
  kCallDropped,           // no usable function name
  kToolCallsFixed,        // tool_calls not an array
  kToolCallIdFixed,       // tool message tool_call_id null / not a string
  kFieldFixed,            // reasoning_content / name null or not a string
  kContentFixed,          // content not a string or a list of typed parts
  kContentAdded,          // assistant without content and tool_calls
  kOrphanToolResult,      // tool result without a matching call -> user message
  kSystemMessageMoved,    // (opt-in) late system message -> user
  kEmptyAssistantDropped, // (opt-in)
  kToolFixed,             // tools[]: description / type / shape
  kToolDropped,           // tools[]: unusable entry removed
};

std::string_view repair_kind_name(RepairKind kind);

struct HistoryRepair {
  RepairKind kind;
  int message = -1;    // index in the input `messages`, -1 for a tools repair
  int tool = -1;       // index in the input `tools`, -1 for a messages repair
  std::string path;    // e.g. "messages[2].tool_calls[0].function.arguments"
  std::string detail;  // what it was and what it became, shortened
};

struct HistoryRepairOptions {
  bool repair_orphan_tool_results = true;
  bool convert_late_system_messages = false;
  bool drop_empty_assistant_turns = false;
  std::string raw_key = "_raw";  // key under which unusable arguments text is kept
};

struct RepairedHistory {
  nlohmann::json messages;
  nlohmann::json tools;
  std::vector<HistoryRepair> repairs;  // in message order, then tools

  bool changed() const { return !repairs.empty(); }
};

inline constexpr size_t kRepairMaxDepth = 128;

// `messages` and `tools` as the client sent them (either may be null/absent; a value that
// is not an array is returned unchanged).
RepairedHistory repair_history(nlohmann::json messages, nlohmann::json tools,
                               const HistoryRepairOptions& options = {});

// The arguments repair on its own: the replacement text for `arguments` (a string or any
// JSON value, nullptr for a missing key), or nullopt when it is already a JSON object (or an
// object value) and stays as it is. `kind` receives what was done.
std::optional<std::string> repair_arguments(const nlohmann::json* arguments, std::string_view raw_key,
                                            RepairKind* kind);

}  // namespace kvgate::rescue
