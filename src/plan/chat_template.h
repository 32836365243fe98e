// A chat template that keeps a conversation's rendered prefix when thinking is off.
//
// Qwen3-family templates render an assistant message's reasoning block only when the message
// comes after the last user message; older replies lose it. With thinking off the generation
// prompt ends in an empty block (<think>\n\n</think>\n\n) that the model's reply follows, so
// once the next user message arrives the previous reply renders differently from how it was
// generated: the engine recomputes that reply and everything after it on every user turn (on
// hybrid and recurrent models, which cannot roll back, the whole prompt).
//
// Qwen3.5/3.6 templates already offer the switch for it: chat_template_kwargs
// `preserve_thinking: true` keeps the block on every reply. For a template that has the
// history guard but not the switch, kvgate writes the same switch into the guard, so the
// gateway asks every template the same way (gateway/template_probe.cc decides per engine
// whether it helps). The template is otherwise byte for byte the model's own: without the
// switch it renders exactly as before.
#pragma once

#include <string>
#include <string_view>

namespace kvgate::plan {

// The chat_template_kwargs switch: keep every earlier reply's reasoning block.
inline constexpr std::string_view kPreserveThinking = "preserve_thinking";

enum class TemplateChange {
  kPatched,            // the history guard now honours preserve_thinking
  kHasSwitch,          // the template already reads preserve_thinking: nothing to change
  kNoThinkingSwitch,   // no enable_thinking: its generation prompt has no empty block to match
  kNoHistoryGuard,     // no `loop.index0 > ns.NAME` guard (a template of another shape)
  kSeveralGuards,      // more than one such guard: which one drops reasoning is not certain
};

struct StableTemplate {
  TemplateChange change = TemplateChange::kNoHistoryGuard;
  std::string text;  // the changed template (kPatched only)

  bool patched() const { return change == TemplateChange::kPatched; }
  // One line for the start log: what was done, or why nothing was.
  std::string describe() const;
};

StableTemplate prefix_stable_template(std::string_view tmpl);

}  // namespace kvgate::plan
