#include "session/tool_clearing.h"

#include <algorithm>
#include <map>

namespace kvgate::session {

using nlohmann::json;

namespace {

// A string member, or "" (stored messages are checked chat messages; this reads them safely).
std::string text_of(const json& object, const char* key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

bool is_tool_result(const json& message) { return text_of(message, "role") == "tool"; }

// The tool name of each call id the assistant messages of `c` made.
std::map<std::string, std::string> call_names(const Conversation& c) {
  std::map<std::string, std::string> names;
  for (const StoredMessage& m : c.kept) {
    const auto calls = m.message.find("tool_calls");
    if (calls == m.message.end() || !calls->is_array()) continue;
    for (const json& call : *calls) {
      if (!call.is_object()) continue;
      const auto fn = call.find("function");
      if (fn != call.end() && fn->is_object()) names[text_of(call, "id")] = text_of(*fn, "name");
    }
  }
  return names;
}

}  // namespace

uint64_t tool_results(const Conversation& c) {
  return static_cast<uint64_t>(std::count_if(
      c.kept.begin(), c.kept.end(), [](const StoredMessage& m) { return is_tool_result(m.message); }));
}

Result<ToolClearingResult> clear_tool_results(Conversation& c, const ToolClearing& spec,
                                              const TextCountFn& count_text) {
  const std::map<std::string, std::string> names = call_names(c);
  std::vector<const StoredMessage*> results;
  for (const StoredMessage& m : c.kept) {
    if (is_tool_result(m.message)) results.push_back(&m);
  }
  ToolClearingResult r;
  if (results.size() <= spec.keep) return r;
  results.resize(results.size() - static_cast<size_t>(spec.keep));  // the newest stay
  std::map<uint64_t, Truncation> cleared;
  for (const StoredMessage* m : results) {
    if (c.truncations.count(m->hash) > 0 || cleared.count(m->hash) > 0) continue;
    const std::string id = text_of(m->message, "tool_call_id");
    const auto name = names.find(id);
    if (name != names.end() && std::find(spec.exclude_tools.begin(), spec.exclude_tools.end(),
                                         name->second) != spec.exclude_tools.end()) {
      continue;
    }
    const std::string text = message_text(m->message);
    if (text.empty()) continue;
    KV_ASSIGN_OR_RETURN(uint64_t tokens, count_text(text));
    cleared[m->hash] = Truncation{.head_chars = 0, .tail_chars = 0, .elided_tokens = tokens};
    r.tokens += tokens;
  }
  if (cleared.empty() || r.tokens < spec.clear_at_least) return ToolClearingResult{};
  r.cleared = cleared.size();
  c.truncations.merge(cleared);
  ++c.generation;
  return r;
}

}  // namespace kvgate::session
