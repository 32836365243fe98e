// OpenAI Responses requests as chat-completions bodies: the request side of POST
// /v1/responses and POST /v1/responses/input_tokens.
//
// What maps (the chat body is what kvgate's chat pipeline runs):
//   instructions                         → a first system message (not carried over from
//                                          earlier responses, as the API specifies)
//   previous_messages (from the gateway's store, for previous_response_id)
//                                        → next, before the new input
//   input string                         → one user message
//   message items (user, assistant, system, developer → system), content a string or parts:
//     input_text / output_text / refusal → text (parts joined with a blank line)
//     input_image with image_url         → an image_url part; has_images
//   function_call items                  → assistant tool_calls (id = call_id); calls that
//                                          follow an assistant message or each other join it,
//                                          so a reply's [message, call, call] output comes
//                                          back as the one chat message it was
//   function_call_output items           → tool messages (output string or text parts; an
//                                          image moves to a user message after the results)
//   reasoning items                      → dropped, like all historical reasoning
//   tools of type function               → chat function tools (strict is not enforced)
//   tool_choice auto / none / required / {type: function, name}
//   max_output_tokens → max_tokens; temperature, top_p, parallel_tool_calls, stream
//   text.format json_schema / json_object → response_format
//   reasoning.effort none or minimal     → "kvgate": {"thinking": false}; any other effort →
//                                          true (a hybrid model thinks or not; minimal asks for
//                                          the fastest answer); absent → the gateway default
//   prompt_cache_key                     → session_key (user and safety_identifier name a
//                                          user, not a conversation, and are not used)
//   context_management [{type: compaction, compact_threshold}] → edits (context_edits.h)
//   compaction items (kvgate's encrypted_content) → carried_summary; the items before go
// Not supported: hosted and custom tools (web_search, file_search, custom, local_shell,
// mcp, ...) and input items of their types are dropped and listed in `ignored`, as are
// unknown fields; item_reference items, input_file parts, image file ids, `conversation`,
// `prompt` and background mode are 400s. Errors are 400 invalid_request_error naming the
// field's path ("input.2.content.0.image_url").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "wire/context_edits.h"
#include "wire/wire_error.h"

namespace kvgate::wire {

struct ResponsesConversion {
  nlohmann::json chat;  // a /v1/chat/completions body
  std::optional<std::string> session_key;
  bool stream = false;
  bool store = true;
  std::optional<std::string> previous_response_id;
  bool has_images = false;
  std::vector<std::string> ignored;  // paths of what was tolerated but not used
  std::string model;
  std::string tools_text;  // chat["tools"] with the client's key order (FunctionTools)
  // The request fields a Response object echoes (instructions, tools, tool_choice,
  // temperature, top_p, max_output_tokens, metadata, parallel_tool_calls, text, reasoning,
  // previous_response_id, store), with the API's defaults for those not given.
  ClientJson echo = ClientJson::object();
  // The conversation's chat messages without the instructions: previous_messages, then this
  // request's input. Stored with output_to_chat_messages() of the answer under the
  // response's id, it is the previous_messages of a request that continues from it.
  nlohmann::json history = nlohmann::json::array();
  size_t previous_count = 0;  // the first entries of `history` that were previous_messages
  ContextEdits edits;         // context_management (context_edits.h)
  // The summary of the last compaction item of the input: `history` holds what came after it
  // (previous_messages included, previous_count is 0); the gateway puts the summary first.
  std::optional<std::string> carried_summary;
};

// `previous_messages`: a JSON array of chat messages (empty when there is no
// previous_response_id).
WireResult<ResponsesConversion> responses_to_chat(const ClientJson& request,
                                                  const nlohmann::json& previous_messages);

// {"object": "response.input_tokens", "input_tokens": N}
ClientJson input_tokens_answer(int64_t input_tokens);

// Input (or output) items as chat messages, appended to `messages`. Shared with
// output_to_chat_messages(): a response's output items are valid input items.
struct ItemNotes {
  bool has_images = false;
  std::vector<std::string> ignored;
  std::optional<std::string> carried_summary;  // a compaction item's (the items before it are gone)
};
WireResult<void> items_to_chat(const ClientJson& items, const std::string& path, nlohmann::json& messages,
                               ItemNotes& notes);

}  // namespace kvgate::wire
