#include "session/thinking.h"

#include <string>

namespace kvgate::session {

using nlohmann::json;

bool apply_thinking_policy(json& body, const ThinkingOptions& options) {
  std::optional<bool> decided;
  if (auto ext = body.find("kvgate"); ext != body.end()) {
    if (ext->is_object()) {
      if (auto t = ext->find("thinking"); t != ext->end() && t->is_boolean()) decided = t->get<bool>();
    }
    body.erase("kvgate");
  }
  if (auto model = body.find("model"); model != body.end() && model->is_string()) {
    std::string name = model->get<std::string>();
    for (const auto& [suffix, on] : {std::pair<std::string, bool>{":no-thinking", false}, {":thinking", true}}) {
      if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
        name.resize(name.size() - suffix.size());
        *model = name;
        if (!decided) decided = on;
        break;
      }
    }
  }
  auto kwargs = body.find("chat_template_kwargs");
  if (!decided && kwargs != body.end() && kwargs->is_object()) {
    if (auto e = kwargs->find("enable_thinking"); e != kwargs->end() && e->is_boolean()) return e->get<bool>();
  }
  if (!decided) {
    if (auto effort = body.find("reasoning_effort"); effort != body.end() && effort->is_string()) {
      decided = effort->get<std::string>() != "none";
    }
  }
  const bool on = decided.value_or(options.default_on);
  if (!body.contains("chat_template_kwargs") || !body["chat_template_kwargs"].is_object()) {
    body["chat_template_kwargs"] = json::object();
  }
  body["chat_template_kwargs"]["enable_thinking"] = on;
  return on;
}

size_t strip_history_reasoning(json& messages) {
  size_t removed = 0;
  if (!messages.is_array()) return 0;
  for (auto& m : messages) {
    if (!m.is_object() || m.value("role", "") != "assistant") continue;
    for (const char* key : {"reasoning_content", "reasoning", "thinking"}) removed += m.erase(key);
  }
  return removed;
}

bool apply_empty_content_fallback(json& response, const ThinkingOptions& options) {
  if (options.fallback != EmptyContentFallback::kReasoningAsContent) return false;
  auto choices = response.find("choices");
  if (choices == response.end() || !choices->is_array()) return false;
  bool changed = false;
  for (auto& c : *choices) {
    if (!c.is_object() || !c.contains("message") || !c["message"].is_object()) continue;
    json& msg = c["message"];
    const bool empty = !msg.contains("content") || msg["content"].is_null() ||
                       (msg["content"].is_string() && msg["content"].get_ref<const std::string&>().empty());
    const bool has_calls = msg.contains("tool_calls") && msg["tool_calls"].is_array() && !msg["tool_calls"].empty();
    auto r = msg.find("reasoning_content");
    if (empty && !has_calls && r != msg.end() && r->is_string() && !r->get_ref<const std::string&>().empty()) {
      msg["content"] = *r;
      changed = true;
    }
  }
  return changed;
}

}  // namespace kvgate::session
