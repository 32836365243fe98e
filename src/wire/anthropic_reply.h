// Chat-completion answers and errors as Anthropic Messages answers (API version 2023-06-01).
//
// chat_to_message maps a chat.completion to a `message`:
//   id            "msg_" + the chat id without "chatcmpl-"
//   content       thinking (reasoning_content; signature "": kvgate drops historical
//                 thinking, so a signature is never checked), text (content), tool_use
//                 blocks (id = the chat tool-call id, so a tool_result refers back to it;
//                 input = the arguments parsed with their keys in order; arguments that are
//                 not a JSON object give input {} — the client's tool then reports the
//                 missing parameters to the model); empty parts give no block
//   stop_reason   length → max_tokens; tool calls → tool_use; a stop word the engine
//                 reports (chat_reply.h: asked for when the request has stop_sequences)
//                 → stop_sequence, with stop_sequence set to it; otherwise end_turn
//   usage         input_tokens = prompt − cached, cache_read_input_tokens = cached,
//                 cache_creation_input_tokens = 0, output_tokens = completion: Anthropic's
//                 input_tokens counts only what was not read from a cache, and the three
//                 input counts add up to the prompt.
//
// Errors: {"type":"error","error":{"type":…,"message":…}} with Anthropic's status and type
// for an HTTP status: 400 invalid_request_error, 401 authentication_error, 403
// permission_error, 404 not_found_error, 413 request_too_large, 429 rate_limit_error, 500
// api_error, 503 → 529 overloaded_error, 504 timeout_error; other 4xx invalid_request_error
// and other 5xx api_error with their status.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "wire/chat_reply.h"
#include "wire/wire_error.h"

namespace kvgate::wire {

ClientJson chat_to_message(const nlohmann::json& chat_response, const std::string& model);

// "msg_" + the chat id's stem.
std::string message_id(std::string_view chat_id);

// Anthropic's stop_reason for a chat finish reason (`stop_word`: the stop string that ended
// the reply, "" when none or not known).
std::string anthropic_stop_reason(std::string_view finish_reason, bool has_tool_calls,
                                  std::string_view stop_word);
// The stop_sequence field: the stop word when stop_reason is stop_sequence, else null.
ClientJson anthropic_stop_sequence(std::string_view finish_reason, bool has_tool_calls,
                                   std::string_view stop_word);

// {input_tokens, cache_creation_input_tokens, cache_read_input_tokens, output_tokens}
ClientJson anthropic_usage(const ChatUsage& usage);

// A tool call's arguments as a tool_use input: the JSON object they hold, keys in order,
// or {} when they do not hold one.
ClientJson tool_input(const std::string& arguments);

ClientJson anthropic_error_body(const WireError& error);

// The error Anthropic's API answers with for an HTTP status.
WireError anthropic_error(int status, std::string message);

// An OpenAI-format error body ({"error": {"message": …}}, as kvgate and the engine answer
// chat requests) with its status, as Anthropic's error; a body without a message keeps the
// status's reason.
WireError anthropic_error_from_openai(int status, const nlohmann::json& body);

}  // namespace kvgate::wire
