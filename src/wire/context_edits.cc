#include "wire/context_edits.h"

#include "wire/fields.h"

namespace kvgate::wire {

namespace {

// A `{"type": T, "value": N}` object whose type is `unit` (or, when given, `other_unit`):
// the unit and N.
struct Threshold {
  std::string unit;
  uint64_t value = 0;
};

WireResult<std::optional<Threshold>> threshold(const Fields& edit, std::string_view key,
                                               std::string_view unit, std::string_view other_unit = {}) {
  KV_ASSIGN_OR_RETURN(const ClientJson* object, edit.optional_object(key));
  if (object == nullptr) return std::optional<Threshold>();
  const Fields t(*object, edit.path_of(key));
  KV_ASSIGN_OR_RETURN(std::string type, t.string("type"));
  if (type != unit && (other_unit.empty() || type != other_unit)) {
    std::string expected = "\"" + std::string(unit) + "\"";
    if (!other_unit.empty()) expected += " or \"" + std::string(other_unit) + "\"";
    return t.error("type", "expected " + expected + ", got \"" + type + "\"");
  }
  KV_ASSIGN_OR_RETURN(auto value, t.optional_integer("value", 1));
  if (!value) return t.error("value", "required");
  return std::optional<Threshold>(Threshold{std::move(type), static_cast<uint64_t>(*value)});
}

WireResult<ClearToolUses> clear_tool_uses(const Fields& edit) {
  ClearToolUses c;
  KV_ASSIGN_OR_RETURN(auto trigger, threshold(edit, "trigger", "input_tokens", "tool_uses"));
  if (trigger && trigger->unit == "tool_uses") {
    c.trigger_tool_uses = trigger->value;
  } else if (trigger) {
    c.trigger_tokens = trigger->value;
  }
  KV_ASSIGN_OR_RETURN(const ClientJson* keep_object, edit.optional_object("keep"));
  if (keep_object != nullptr) {
    const Fields keep(*keep_object, edit.path_of("keep"));
    KV_ASSIGN_OR_RETURN(std::string type, keep.string("type"));
    if (type != "tool_uses") return keep.error("type", "expected \"tool_uses\", got \"" + type + "\"");
    KV_ASSIGN_OR_RETURN(auto value, keep.optional_integer("value", 0));
    if (!value) return keep.error("value", "required");
    c.keep = static_cast<uint64_t>(*value);
  }
  KV_ASSIGN_OR_RETURN(auto at_least, threshold(edit, "clear_at_least", "input_tokens"));
  if (at_least) c.clear_at_least = at_least->value;
  KV_ASSIGN_OR_RETURN(const ClientJson* excluded, edit.optional_array("exclude_tools"));
  for (size_t i = 0; excluded != nullptr && i < excluded->size(); ++i) {
    const ClientJson& name = (*excluded)[i];
    if (!name.is_string())
      return invalid_request(child_path(edit.path_of("exclude_tools"), i), "expected a string");
    c.exclude_tools.push_back(name.get<std::string>());
  }
  if (const ClientJson* inputs = edit.find("clear_tool_inputs")) {
    if (!inputs->is_boolean() && !inputs->is_array()) {
      return edit.error("clear_tool_inputs", "expected a boolean or an array of tool names");
    }
    c.clear_inputs = inputs->is_array() ? !inputs->empty() : inputs->get<bool>();
  }
  return c;
}

WireResult<CompactEdit> compact_edit(const Fields& edit) {
  CompactEdit c;
  KV_ASSIGN_OR_RETURN(auto trigger, threshold(edit, "trigger", "input_tokens"));
  if (trigger) c.trigger_tokens = trigger->value;
  KV_ASSIGN_OR_RETURN(auto instructions, edit.optional_string("instructions"));
  if (instructions && instructions->find_first_not_of(" \t\r\n") != std::string::npos)
    c.instructions = *instructions;
  KV_ASSIGN_OR_RETURN(auto pause, edit.optional_bool("pause_after_compaction"));
  c.pause = pause.value_or(false);
  return c;
}

constexpr std::string_view kTokenPrefix = "kvgate-summary-v1\n";

}  // namespace

WireResult<ContextEdits> anthropic_context_edits(const ClientJson& value) {
  KV_ASSIGN_OR_RETURN(Fields top, Fields::of(value, "context_management"));
  ContextEdits edits;
  edits.requested = true;
  KV_ASSIGN_OR_RETURN(const ClientJson* list, top.optional_array("edits"));
  for (size_t i = 0; list != nullptr && i < list->size(); ++i) {
    KV_ASSIGN_OR_RETURN(Fields edit, Fields::of((*list)[i], child_path(top.path_of("edits"), i)));
    KV_ASSIGN_OR_RETURN(std::string type, edit.string("type"));
    if (type == "clear_tool_uses_20250919") {
      if (edits.clear_tool_uses) return edit.error("type", "clear_tool_uses_20250919 is given twice");
      KV_ASSIGN_OR_RETURN(ClearToolUses c, clear_tool_uses(edit));
      edits.clear_tool_uses = std::move(c);
    } else if (type == "compact_20260112") {
      if (edits.compact) return edit.error("type", "compact_20260112 is given twice");
      KV_ASSIGN_OR_RETURN(CompactEdit c, compact_edit(edit));
      edits.compact = std::move(c);
    } else if (type != "clear_thinking_20251015") {
      return edit.error(
          "type", "expected clear_tool_uses_20250919, clear_thinking_20251015 or compact_20260112, got '" +
                      type + "'");
    }
  }
  return edits;
}

WireResult<ContextEdits> responses_context_edits(const ClientJson& value) {
  if (!value.is_array()) {
    return invalid_request("context_management", "expected an array, got " + std::string(json_kind(value)));
  }
  ContextEdits edits;
  edits.requested = true;
  for (size_t i = 0; i < value.size(); ++i) {
    KV_ASSIGN_OR_RETURN(Fields entry, Fields::of(value[i], child_path("context_management", i)));
    KV_ASSIGN_OR_RETURN(std::string type, entry.string("type"));
    if (type != "compaction") return entry.error("type", "expected \"compaction\", got \"" + type + "\"");
    if (edits.compact) return entry.error("type", "compaction is given twice");
    KV_ASSIGN_OR_RETURN(auto at, entry.optional_integer("compact_threshold", 1));
    CompactEdit c;
    if (at) c.trigger_tokens = static_cast<uint64_t>(*at);
    edits.compact = std::move(c);
  }
  return edits;
}

std::string compaction_token(std::string_view summary) {
  return std::string(kTokenPrefix) + std::string(summary);
}

std::optional<std::string> summary_of_compaction_token(std::string_view token) {
  if (token.substr(0, kTokenPrefix.size()) != kTokenPrefix) return std::nullopt;
  return std::string(token.substr(kTokenPrefix.size()));
}

}  // namespace kvgate::wire
