#include "plan/chat_template.h"

#include <regex>

#include <fmt/format.h>

namespace kvgate::plan {

std::string StableTemplate::describe() const {
  switch (change) {
    case TemplateChange::kPatched:
      return "the model's template, with its reasoning-history guard also honouring preserve_thinking";
    case TemplateChange::kHasSwitch:
      return "the model's template as it is (it already reads preserve_thinking)";
    case TemplateChange::kNoThinkingSwitch:
      return "the model's template as it is (it has no enable_thinking switch)";
    case TemplateChange::kNoHistoryGuard:
      return "the model's template as it is (no reasoning-history guard found)";
    case TemplateChange::kSeveralGuards:
      return "the model's template as it is (more than one reasoning-history guard: left alone)";
  }
  return "the model's template as it is";
}

StableTemplate prefix_stable_template(std::string_view tmpl) {
  StableTemplate out;
  if (tmpl.find(kPreserveThinking) != std::string_view::npos) {
    out.change = TemplateChange::kHasSwitch;
    return out;
  }
  if (tmpl.find("enable_thinking") == std::string_view::npos) {
    out.change = TemplateChange::kNoThinkingSwitch;
    return out;
  }
  // The guard compares the message's index with the last user message's, kept in a namespace.
  static const std::regex guard(R"(loop\.index0\s*>\s*ns\.[A-Za-z_][A-Za-z0-9_]*)");
  const std::string text(tmpl);
  auto begin = std::sregex_iterator(text.begin(), text.end(), guard);
  const auto n = std::distance(begin, std::sregex_iterator());
  if (n == 0) {
    out.change = TemplateChange::kNoHistoryGuard;
    return out;
  }
  if (n > 1) {
    out.change = TemplateChange::kSeveralGuards;
    return out;
  }
  const std::smatch& m = *begin;
  const auto at = static_cast<size_t>(m.position(0));
  out.change = TemplateChange::kPatched;
  out.text = fmt::format("{}(({} is defined and {} is true) or {}){}", text.substr(0, at), kPreserveThinking,
                         kPreserveThinking, m.str(0), text.substr(at + static_cast<size_t>(m.length(0))));
  return out;
}

}  // namespace kvgate::plan
