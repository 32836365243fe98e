#include "gateway/conversation_name.h"

namespace kvgate::gateway {

using nlohmann::json;

std::optional<std::string> usable_conversation_id(std::string_view v) {
  if (v.empty() || v.size() > 200) return std::nullopt;
  for (char c : v) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f || c == '/') return std::nullopt;
  }
  return std::string(v);
}

std::optional<ConversationName> header_conversation(std::optional<std::string_view> session_header) {
  if (!session_header) return std::nullopt;
  if (auto id = usable_conversation_id(*session_header)) return ConversationName{*id, "header"};
  return std::nullopt;
}

std::optional<ConversationName> cache_key_conversation(std::string_view key) {
  if (auto id = usable_conversation_id(key)) return ConversationName{"cache:" + *id, "prompt_cache_key"};
  return std::nullopt;
}

std::optional<ConversationName> named_conversation(std::optional<std::string_view> session_header,
                                                   const json& body) {
  if (auto named = header_conversation(session_header)) return named;
  if (!body.is_object()) return std::nullopt;
  if (auto key = body.find("prompt_cache_key"); key != body.end() && key->is_string()) {
    if (auto named = cache_key_conversation(key->get_ref<const std::string&>())) return named;
  }
  if (auto user = body.find("user"); user != body.end() && user->is_string()) {
    if (auto id = usable_conversation_id(user->get_ref<const std::string&>())) {
      return ConversationName{"user:" + *id, "user"};
    }
  }
  return std::nullopt;
}

}  // namespace kvgate::gateway
