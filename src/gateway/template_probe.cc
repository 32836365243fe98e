// How the engine's chat template renders a past reply (Gateway::template_marks): asked once
// per engine start through /apply-template, so that with thinking off every past reply is
// sent the way the template renders it exactly as it was generated.
#include <string>

#include "gateway/gateway.h"
#include "plan/chat_template.h"
#include "util/json.h"
#include "util/log.h"

namespace kvgate::gateway {

using nlohmann::json;

namespace {

bool thinking_off(const json& body) {
  auto kwargs = body.find("chat_template_kwargs");
  if (kwargs == body.end() || !kwargs->is_object()) return false;
  auto on = kwargs->find("enable_thinking");
  return on != kwargs->end() && on->is_boolean() && !on->get<bool>();
}

// The probe's conversation: a user message, a reply, then either a tool call's result (the
// tool loop) or a new user message (the next turn).
json probe_messages(bool mark, bool tool_turn) {
  json reply = {{"role", "assistant"}, {"content", "kvgate probe reply"}};
  if (mark) reply["reasoning_content"] = "\n";
  json next = {{"role", "user"}, {"content", "kvgate probe next"}};
  if (tool_turn) {
    reply["tool_calls"] = json::array(
        {{{"id", "call_probe"}, {"type", "function"}, {"function", {{"name", "probe"}, {"arguments", "{}"}}}}});
    next = {{"role", "tool"}, {"tool_call_id", "call_probe"}, {"content", "ok"}};
  }
  return json::array({{{"role", "user"}, {"content", "kvgate template probe"}}, reply, next});
}

}  // namespace

Gateway::TemplateMarks Gateway::template_marks() {
  std::lock_guard lock(probe_mu_);
  const uint64_t generation = engine_.generation();
  const auto now = std::chrono::steady_clock::now();
  // Asked once per engine start; an engine that did not answer is asked again a minute later
  // (a turn never waits on a silent engine for more than the probe's short time-out).
  if (template_marks_ && template_marks_generation_ == generation && (template_answered_ || now < probe_retry_)) {
    return *template_marks_;
  }
  template_marks_ = TemplateMarks{};
  template_answered_ = false;
  template_marks_generation_ = generation;
  probe_retry_ = now + std::chrono::minutes(1);
  auto render = [&](const json& messages, bool preserve) -> std::optional<std::string> {
    json kwargs = {{"enable_thinking", false}};
    if (preserve) kwargs[std::string(plan::kPreserveThinking)] = true;
    const json body = {{"messages", messages}, {"chat_template_kwargs", kwargs}};
    auto res = upstream_->call("POST", "/apply-template", util::json_text(body), std::chrono::seconds(1));
    if (!res.ok() || res->status != 200) return std::nullopt;
    auto j = json::parse(res->body, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("prompt") || !j["prompt"].is_string())
      return std::nullopt;
    return j["prompt"].get<std::string>();
  };
  const auto opening = render(json::array({probe_messages(false, false)[0]}), false);
  if (!opening) return *template_marks_;
  // Does the reply render exactly as the generation prompt left it, with what follows after it?
  const std::string expected = *opening + "kvgate probe reply";
  auto continues = [&](const TemplateMarks& m, bool tool_turn) -> std::optional<bool> {
    auto r = render(probe_messages(m.reasoning, tool_turn), m.preserve);
    if (!r) return std::nullopt;
    return r->rfind(expected, 0) == 0;
  };
  // The least that makes both the tool loop and the next user turn exact; failing that, the
  // least that makes the tool loop exact; failing that, nothing.
  std::optional<TemplateMarks> tool_only;
  std::optional<TemplateMarks> both;
  for (const TemplateMarks m : {TemplateMarks{false, false}, TemplateMarks{true, false}, TemplateMarks{false, true},
                                TemplateMarks{true, true}}) {
    const auto tool = continues(m, true);
    if (!tool) return *template_marks_;
    if (!*tool) continue;
    if (!tool_only) tool_only = m;
    const auto user = continues(m, false);
    if (!user) return *template_marks_;
    if (*user) {
      both = m;
      break;
    }
  }
  template_answered_ = true;
  template_marks_ = both ? *both : tool_only.value_or(TemplateMarks{});
  template_marks_->user_turn_exact = both.has_value();
  util::log_event(util::LogLevel::kInfo, "template_probe",
                  {{"empty_reasoning", template_marks_->reasoning},
                   {"preserve_thinking", template_marks_->preserve},
                   {"tool_turn_exact", tool_only.has_value()},
                   {"user_turn_exact", both.has_value()}});
  return *template_marks_;
}

void Gateway::mark_template_kwargs(json& body) {
  if (!thinking_off(body) || !template_marks().preserve) return;
  json& kwargs = body["chat_template_kwargs"];
  if (!kwargs.contains(plan::kPreserveThinking)) kwargs[std::string(plan::kPreserveThinking)] = true;
}

json Gateway::upstream_view(json view, const json& body) {
  if (!view.is_array() || !thinking_off(body) || !template_marks().reasoning) return view;
  for (auto& m : view) {
    if (m.is_object() && m.value("role", "") == "assistant" && !m.contains("reasoning_content")) {
      m["reasoning_content"] = "\n";
    }
  }
  return view;
}

}  // namespace kvgate::gateway
