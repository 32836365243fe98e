#include "gateway/context_summary.h"

namespace kvgate::gateway {

using nlohmann::json;

json summary_message(const std::string& summary) {
  return {{"role", "user"}, {"content", session::summary_note_text({.text = summary})}};
}

session::Conversation compacted_for_client(const session::Conversation& conv, const std::string& summary) {
  session::Conversation c;
  c.pinned_system = conv.pinned_system;
  if (conv.system) c.append(conv.system->message);
  c.append(summary_message(summary));
  c.tools = conv.tools;
  c.generation = conv.generation + 1;
  return c;
}

void put_carried_summary(json& chat_body, const std::string& summary) {
  json& messages = chat_body["messages"];
  if (!messages.is_array()) messages = json::array();
  const bool system_first = !messages.empty() && messages[0].is_object() && messages[0].contains("role") &&
                            messages[0]["role"] == "system";
  messages.insert(messages.begin() + (system_first ? 1 : 0), summary_message(summary));
}

}  // namespace kvgate::gateway
