// Lenient recovery of tool calls from the raw text of a generation.
//
// Used when the engine rejects its own output (HTTP 500 "The model produced output that does
// not match the expected ... format") or returns calls it could not read: the gateway gets
// the raw text back and turns it into the OpenAI assistant message the client expected.
//
// Formats recognised (several may appear in one text):
//   Hermes / Qwen   <tool_call>{"name": ..., "arguments": {...}}</tool_call>, one or many,
//                   terminated or not, arguments as an object or a JSON string, JSON inside
//                   a ``` fence, lenient JSON (single quotes, True/False/None, trailing commas)
//   Qwen3-Coder     <tool_call><function=NAME><parameter=KEY>VALUE</parameter>...</function>
//                   </tool_call>, also without the <tool_call> wrapper; values are text,
//                   typed by the tool's schema
//   LFM2            <|tool_call_start|>[f(a=1, b="x"), g()]<|tool_call_end|> with Python
//                   literal values (or a JSON list of call objects)
//   plain JSON      only when none of the markers above occurs: {"name", "arguments" |
//                   "parameters"}, {"type": "function", "function": {...}}, {"function":
//                   NAME, "arguments"}, {"tool_calls": [...]}, or a list of those, as the
//                   whole text, in a ```json fence, or inside prose.
// <think>...</think> blocks (and text before a lone leading </think>, when the prompt opened
// the block) are reasoning: calls inside them are not executed; the text goes to
// `reasoning_content` (or stays in the content with extract_reasoning = false).
//
// Validation against the request's `tools`: a call naming no declared tool is never
// emitted; its text stays in the content (kUnknownTool). Arguments are coerced to the
// tool's schema where unambiguous (see tool_schema.h). A call whose JSON was cut off
// (max_tokens) is left as text unless accept_truncated: executing half an argument (half a
// file) is worse than showing the text.
//
// Output: `message` = {"role": "assistant", "content": TEXT | null, ["reasoning_content":
// TEXT], ["tool_calls": [{"id": "call_<n>", "type": "function", "function": {"name",
// "arguments": JSON-TEXT}}]]}. Content is the text left after removing calls and reasoning,
// trimmed, with the pieces around removed calls joined by a newline; it is null when there
// are calls and no text, "" when there is neither. All strings are valid UTF-8 (invalid bytes
// become U+FFFD). Ids count up from first_id in text order.
//
// Contract: pure and deterministic (same input, same output); never throws or aborts on any
// input; work is linear in the input up to constant limits (max_input_bytes, max_calls,
// a bounded number of JSON attempts in prose). Thread-safe (no shared state).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "rescue/tool_schema.h"

namespace kvgate::rescue {

struct ToolCallParseOptions {
  std::string id_prefix = "call_";
  size_t first_id = 0;
  size_t max_calls = 64;                  // further calls are left as text (kTooManyCalls)
  size_t max_input_bytes = size_t{4} << 20;  // only the head is read beyond this
  bool accept_truncated = false;          // keep calls whose JSON was cut off, closed
  bool extract_reasoning = true;
};

struct ToolCallParseResult {
  nlohmann::json message;       // the OpenAI assistant message (see above)
  std::vector<CallNote> notes;  // what was coerced, dropped or left as text, in text order

  size_t call_count() const;
  bool has_issue(CallIssue issue) const;
};

ToolCallParseResult parse_tool_calls(std::string_view raw, const nlohmann::json& tools,
                                     const ToolCallParseOptions& options = {});

}  // namespace kvgate::rescue
