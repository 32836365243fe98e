// Parsing and validation of OpenAI chat-completion requests at the edge.
//
// parse_chat_request() turns a request body into a ChatRequest, or the ApiError (400) that
// names the offending field ("messages[3].role must be one of ..."). Validation covers what
// kvgate itself relies on (messages and their roles and content shapes, stream, n, token
// limits, tools, session hints as ids, request_checks.h) and the size of the answer
// (top_logprobs and n_probs at most kMaxTopLogprobs); other fields pass through to the engine
// untouched, which validates its own parameters (its errors are relayed in the same format).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "gateway/api_error.h"
#include "gateway/request_limits.h"

namespace kvgate::gateway {

struct ChatRequest {
  nlohmann::json body;             // the whole request object (validated)
  bool stream = false;
  bool include_usage = false;      // stream_options.include_usage
  std::optional<int64_t> max_tokens;  // max_completion_tokens, max_tokens or n_predict
  std::string model;
  std::optional<std::string> user;
  bool has_tools = false;
  // body["tools"] as JSON text with the keys in the order the client wrote them (what the
  // engine renders into the prompt); empty: the body's own value, keys sorted, is sent.
  std::string tools_text;

  nlohmann::json& messages() { return body["messages"]; }
  const nlohmann::json& messages() const { return body.at("messages"); }
};

// The request, or the error to answer with.
ApiResult<ChatRequest> parse_chat_request(std::string_view text);
// The same for a body that is already parsed (e.g. after history repair).
ApiResult<ChatRequest> make_chat_request(nlohmann::json body);
// The body's tools as JSON text in the client's key order: `written` (the client's own text
// of them, TurnInput::tools_text) re-written compact when it holds the same JSON as
// body["tools"] (history repair may have changed them); empty otherwise.
std::string tools_as_written(std::string_view written, const nlohmann::json& body);
// Validates an already parsed body (same rules); used for requests built internally too.
ApiStatus validate_chat_body(const nlohmann::json& body);

// What a chat body asks of the answer's shape: stream, and stream_options.include_usage
// (fields of another type count as absent; validate_chat_body refuses them).
struct StreamFlags {
  bool stream = false;
  bool include_usage = false;
};
StreamFlags stream_flags(const nlohmann::json& body);

// The largest max_tokens / max_completion_tokens / n_predict accepted (the engines keep it in
// an int32); -1 means no limit.
inline constexpr int64_t kMaxReplyTokens = 2147483647;
// The most alternatives per token an answer may list (top_logprobs, n_probs), as OpenAI's API.
inline constexpr int64_t kMaxTopLogprobs = 20;

// Validates a raw text-completion body (/v1/completions): an object with a prompt, stream a
// boolean, max_tokens / n_predict in range, at most kMaxTopLogprobs alternatives per token
// (logprobs, top_logprobs, n_probs). The rest is the engine's to validate.
ApiStatus validate_completion_body(const nlohmann::json& body);

// Parses a JSON request body from a client; a 400 naming where it failed:
//   - nesting deeper than `max_depth` containers: refused by a linear scan before parsing,
//     so the deeper value never exists (code nesting_too_deep, param the path to it);
//   - invalid JSON, including invalid UTF-8 in any string (invalid_json, with the byte
//     position; the message itself is always valid UTF-8);
//   - numbers outside double's range, e.g. 1e999999 or a 400-digit integer (invalid_number,
//     param the field).
// Every body kvgate parses from a client goes through here.
ApiResult<nlohmann::json> parse_json_body(std::string_view text, size_t max_depth = kMaxJsonDepth);
// The same, keeping the keys in the order the client wrote them (the Anthropic and Responses
// requests: a tool call's input goes back to the engine as the model wrote it).
ApiResult<nlohmann::ordered_json> parse_client_json_body(std::string_view text, size_t max_depth = kMaxJsonDepth);

}  // namespace kvgate::gateway
