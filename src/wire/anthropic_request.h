// Anthropic Messages requests (API version 2023-06-01) as chat-completions bodies: the
// request side of POST /v1/messages and POST /v1/messages/count_tokens.
//
// What maps (the chat body is what kvgate's chat pipeline runs):
//   system (string or text blocks, joined)        → a first system message
//   messages[].content string                     → the message's content
//   text blocks of one message                    → its content, joined with a blank line
//   image blocks (base64 or url source)           → image_url parts (data: URL for base64);
//                                                   has_images (the gateway refuses them
//                                                   when the engine has no vision)
//   document blocks with a text source            → text
//   assistant tool_use blocks                     → tool_calls (id kept; arguments = the
//                                                   JSON text of input, keys in order)
//   user tool_result blocks                       → one tool message each, in the order
//                                                   given, before the rest of the user turn;
//                                                   is_error → text prefixed "Error: "; an
//                                                   image inside a result moves to the
//                                                   user message that follows
//   thinking / redacted_thinking blocks           → dropped: kvgate drops historical
//                                                   reasoning from every request anyway
//   tools (custom: name, description, input_schema) → function tools
//   tool_choice auto / any / tool / none          → "auto" / "required" / {function} / "none";
//     disable_parallel_tool_use                   → parallel_tool_calls: false
//   max_tokens (required), stop_sequences (→ stop, and "verbose": true so the engine says
//   which one ended the reply), temperature, top_p, top_k, stream
//   thinking enabled / adaptive / disabled        → "kvgate": {"thinking": true/true/false};
//                                                   budget_tokens → thinking_budget_tokens
//                                                   (mainline llama-server enforces it);
//                                                   absent → the gateway's default
//   the cch= stamp of Claude Code's billing header line at the start of the system prompt,
//   new in every request, is masked so requests share their cached prefix
//   metadata.user_id                              → session_key
//   role "system" messages                        → system messages where they stand
//   context_management                            → edits (context_edits.h)
//   an assistant `compaction` block with a summary → carried_summary; the messages and
//                                                   blocks before it are dropped
// Not supported: server tools (web_search_…, code_execution_…, bash_…, text_editor_…),
// dropped and listed in `ignored`, as is every top-level field not above (cache_control,
// output_config, service_tier, ...) and every content block of an
// unknown type. Documents other than text, image file ids, tool_use in a user turn and
// tool_result in an assistant turn are 400s. Errors are 400 invalid_request_error with the
// field's path. The request may be a plain nlohmann::json too (it converts), but then its
// keys are sorted before they arrive here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "wire/context_edits.h"
#include "wire/wire_error.h"

namespace kvgate::wire {

struct ChatConversion {
  nlohmann::json chat;  // a /v1/chat/completions body
  std::optional<std::string> session_key;
  bool stream = false;
  bool has_images = false;
  std::vector<std::string> ignored;  // paths of what was tolerated but not used
  std::string model;                 // as the client named it, to echo back
  std::string tools_text;            // chat["tools"] with the client's key order (FunctionTools)
  ContextEdits edits;                // context_management (context_edits.h)
  // The summary of the last compaction block carried back: the messages before it are not
  // in `chat`; the gateway puts the summary in their place.
  std::optional<std::string> carried_summary;
};

WireResult<ChatConversion> messages_to_chat(const ClientJson& request);

// The chat body whose prompt a /v1/messages/count_tokens request measures (max_tokens is not
// required there, and the body carries no sampling settings).
WireResult<ChatConversion> count_tokens_to_chat(const ClientJson& request);

// {"input_tokens": N}
ClientJson count_tokens_answer(int64_t input_tokens);

}  // namespace kvgate::wire
