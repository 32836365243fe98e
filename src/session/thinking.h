// Thinking policy: agents expect answers in `content`, but thinking models (Qwen3 and
// successors) put them in `reasoning_content` when thinking is on. kvgate turns thinking
// off unless the client asks for it, and keeps the conversation history free of old
// reasoning the same way every turn, so the rendered prompt prefix stays stable.
//
// A client asks for thinking with any of (first match wins):
//   - "kvgate": {"thinking": true|false} in the request body (removed before forwarding);
//   - a model name suffix ":thinking" / ":no-thinking" (removed before forwarding);
//   - chat_template_kwargs.enable_thinking given explicitly (respected as is);
//   - reasoning_effort: "none" → off, any other value → on;
// otherwise the server-wide default applies (kvgate up --thinking on|off, default off).
#pragma once

#include <nlohmann/json.hpp>

namespace kvgate::session {

enum class EmptyContentFallback {
  kKeep,                // leave the engine's answer as it is
  kReasoningAsContent,  // empty content + non-empty reasoning → reasoning becomes the content
};

struct ThinkingOptions {
  bool default_on = false;
  EmptyContentFallback fallback = EmptyContentFallback::kReasoningAsContent;
};

// Decides thinking for this request and rewrites `body` accordingly (chat_template_kwargs,
// model name, kvgate extension field). Returns whether thinking is on.
bool apply_thinking_policy(nlohmann::json& body, const ThinkingOptions& options);

// Removes reasoning from every assistant message of the history (reasoning_content and the
// non-standard "reasoning"/"thinking" fields some clients echo). Returns how many were
// removed.
size_t strip_history_reasoning(nlohmann::json& messages);

// Applies the empty-content fallback to a chat completion response body (choices[].message).
// Returns true if it changed anything.
bool apply_empty_content_fallback(nlohmann::json& response, const ThinkingOptions& options);

}  // namespace kvgate::session
