// Chat-completion answers as OpenAI Responses `response` objects, and back.
//
// chat_to_response maps a chat.completion:
//   status        completed; incomplete with incomplete_details.reason =
//                 "max_output_tokens" when the engine stopped at the token limit (the last
//                 output item is then "incomplete" too)
//   output        reasoning (reasoning_content as one reasoning_text content part; summary
//                 empty: the engine writes no summaries), message (one output_text with
//                 annotations []), one function_call per tool call (call_id = the chat
//                 tool-call id, arguments as the engine wrote them), in that order
//   item ids      "rs_", "msg_", "fc_" + the response id's stem + "_" + the output index,
//                 the same in the streamed form
//   usage         input_tokens = the whole prompt (OpenAI counts cached tokens in it),
//                 input_tokens_details.cached_tokens, output_tokens,
//                 output_tokens_details.reasoning_tokens (0: the engines do not count them),
//                 total_tokens
//   echo          the request fields of ResponsesConversion::echo
// output_to_chat_messages turns a response's output back into the chat messages it adds to
// the conversation (what the gateway stores for previous_response_id).
//
// Errors keep OpenAI's shape, the same as chat completions:
// {"error": {"message", "type", "param", "code"}}.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "wire/chat_reply.h"
#include "wire/output_sequence.h"
#include "wire/responses_request.h"
#include "wire/wire_error.h"

namespace kvgate::wire {

ClientJson chat_to_response(const nlohmann::json& chat_response, const ResponsesConversion& conversion,
                            const std::string& response_id, int64_t created_at);

// The assistant chat messages a response's output adds (reasoning dropped, a message and the
// function calls after it joined as one message).
nlohmann::json output_to_chat_messages(const ClientJson& response);

ClientJson responses_error_body(const WireError& error);

// Shared by the streamed and the non-streamed form.
enum class ResponseStatus { kInProgress, kCompleted, kIncomplete, kFailed };
std::string_view status_name(ResponseStatus status);
// "rs_…", "msg_…" or "fc_…" for the output item at `output_index`.
std::string item_id(BlockKind kind, std::string_view response_id, size_t output_index);
// A compaction output item holding kvgate's `encrypted_content` (context_edits.h).
ClientJson compaction_item(std::string_view response_id, const std::string& encrypted_content);
// The output item at `output_index`: reasoning (text = the reasoning), message (text = the
// output text) or function_call (text = the arguments). With status "in_progress" it comes
// without its text, as the stream announces it.
ClientJson output_item(BlockKind kind, std::string_view response_id, size_t output_index,
                       const std::string& text, const std::string& call_id, const std::string& name,
                       std::string_view status);
ClientJson output_text_part(const std::string& text);  // {type: output_text, text, annotations, logprobs}
ClientJson responses_usage(const ChatUsage& usage);
// The response object: id, status, the echoed request fields, output, usage (null when not
// known), error (null unless failed), incomplete_details.
ClientJson response_object(const ResponsesConversion& conversion, const std::string& response_id,
                           int64_t created_at, ResponseStatus status, ClientJson output,
                           const std::optional<ChatUsage>& usage, ClientJson error = nullptr);

}  // namespace kvgate::wire
