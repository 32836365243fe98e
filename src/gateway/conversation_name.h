// The conversation a client names: by a header or a body field, checked to be an id kvgate
// can keep as it is. A chat turn (turn.h) finds a named conversation by that id only; the
// fleet (fleet/affinity.h) keeps such a conversation on one engine. Pure.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace kvgate::gateway {

// A conversation its client named, and how ("header", "prompt_cache_key", "user", or what
// an adapter calls its own field). Sessions named so are found by id only (session.h).
struct ConversationName {
  std::string id;
  std::string how;
};

// A client-given conversation id kvgate accepts as it is: 1 to 200 bytes, no control
// characters, no '/'. nullopt otherwise (the request is then recognised by its content).
std::optional<std::string> usable_conversation_id(std::string_view candidate);

// The conversation a chat-completions request names: the X-Session-Id header, else the
// `prompt_cache_key` field ("cache:" ID), else the `user` field ("user:" ID); each only when
// usable_conversation_id accepts it.
std::optional<ConversationName> named_conversation(std::optional<std::string_view> session_header,
                                                   const nlohmann::json& body);
// The pieces of it the other wire APIs use: the X-Session-Id header's conversation, and the
// one a `prompt_cache_key` names ("cache:" ID).
std::optional<ConversationName> header_conversation(std::optional<std::string_view> session_header);
std::optional<ConversationName> cache_key_conversation(std::string_view key);

}  // namespace kvgate::gateway
