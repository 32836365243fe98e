// Rescue of a generation the engine rejected (Gateway::rescue_generation): the rendered
// prompt is replayed as a raw, streamed completion with the same seed and sampling
// settings (already cached, so it costs decoding only), and the text is parsed leniently
// for tool calls (tool_call_parse.h). See docs/RESCUE.md for the measurements behind it.
#include <fmt/format.h>

#include "gateway/gateway.h"
#include "gateway/rescue_replay.h"
#include "rescue/history_repair.h"
#include "rescue/relaxed_json.h"
#include "rescue/tool_call_parse.h"
#include "util/json.h"
#include "util/log.h"

namespace kvgate::gateway {

using rescue::ToolCallParseResult;
using rescue::call_issue_name;
using rescue::parse_strict_json;
using rescue::parse_tool_calls;
using rescue::repair_history;
using rescue::sanitize_utf8;

using nlohmann::json;

Result<Gateway::Rescue> Gateway::rescue_generation(const json& body, size_t first_call_id, CancelScope& cancel,
                                                  const std::string& reason) {
  const std::string body_text = util::json_text(body);
  auto rendered = upstream_->call("POST", "/apply-template", body_text, std::chrono::seconds(60), &cancel);
  if (auto* err = std::get_if<UpstreamError>(&rendered)) return Error("rescue: " + err->message);
  auto& rr = std::get<UpstreamResponse>(rendered);
  auto rj = json::parse(rr.body, nullptr, false);
  if (rr.status != 200 || rj.is_discarded() || !rj.contains("prompt") || !rj["prompt"].is_string()) {
    return Error(fmt::format("rescue: the engine could not render the request ({})", rr.status));
  }
  const json replay = replay_completion_body(body, rj["prompt"].get<std::string>());
  ReplayText text;
  const EventStreamEnd stream = stream_events(
      *upstream_, "/completion", util::json_text(replay),
      [&](const std::string& data) { text.add_event(data); }, upstream_timeout(0, false), &cancel);
  if (stream.failure) return Error("rescue: " + stream.failure->message);
  const bool refused_output = stream.status != 200 && is_output_parse_error(stream.status, stream.error_body);
  if (stream.status != 200 && !refused_output) {
    return Error(fmt::format("rescue: the replay was refused ({}): {}", stream.status, stream.error_body.substr(0, 300)));
  }
  Rescue r;
  if (refused_output || (text.text().empty() && text.failed())) {
    // Neither the engine's parser, the lenient parser nor the replay gave a tool call or
    // readable text: the model's output is unusable, the engine is not broken. The client
    // still gets an answer — what text there was, sanitised — marked as rescued raw.
    r.message = {{"role", "assistant"}, {"content", sanitize_utf8(text.text())}};
    r.finish_reason = "stop";
    r.raw = true;
    r.prompt_tokens = static_cast<uint64_t>(std::max(0, text.tokens_evaluated()));
    r.completion_tokens = static_cast<uint64_t>(std::max(0, text.tokens_predicted()));
    metrics_.add("rescues_total{outcome=\"raw\"}");
    util::log_event(util::LogLevel::kWarn, "rescue",
                    {{"reason", reason},
                     {"outcome", "raw"},
                     {"replay_status", stream.status},
                     {"replay_error", sanitize_utf8(stream.error_body.substr(0, 300))},
                     {"raw", sanitize_utf8(text.text().substr(0, 2000))}});
    return r;
  }

  const json tools = body.contains("tools") ? body["tools"] : json::array();
  ToolCallParseResult parsed = parse_tool_calls(text.text(), tools, {.first_id = first_call_id});
  r.message = parsed.message;
  r.finish_reason = parsed.call_count() > 0 ? "tool_calls" : (text.stopped_by_limit() ? "length" : "stop");
  r.prompt_tokens = static_cast<uint64_t>(std::max(0, text.tokens_evaluated()));
  r.cached_tokens = std::min<uint64_t>(r.prompt_tokens, static_cast<uint64_t>(std::max(0, text.tokens_cached())));
  r.completion_tokens = static_cast<uint64_t>(std::max(0, text.tokens_predicted()));
  r.calls = parsed.call_count();
  json notes = json::array();
  for (const auto& n : parsed.notes) {
    notes.push_back({{"issue", std::string(call_issue_name(n.issue))}, {"call", n.call}, {"detail", n.detail}});
  }
  const std::string outcome = r.calls > 0 ? "tool_calls" : "content";
  metrics_.add(fmt::format("rescues_total{{outcome=\"{}\"}}", outcome));
  util::log_event(util::LogLevel::kInfo, "rescue",
                  {{"reason", reason},
                   {"outcome", outcome},
                   {"calls", r.calls},
                   {"prompt_tokens", r.prompt_tokens},
                   {"cached_tokens", r.cached_tokens},
                   {"raw", sanitize_utf8(text.text().substr(0, 2000))},
                   {"replay_failed_midway", text.failed()},
                   {"notes", notes}});
  return r;
}

json Gateway::rescued_response(const Rescue& r, const std::string& model) {
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  return {{"id", fmt::format("chatcmpl-kvgate-{}", now)},
          {"object", "chat.completion"},
          {"created", now},
          {"model", model},
          {"choices", json::array({{{"index", 0}, {"message", r.message}, {"finish_reason", r.finish_reason}}})},
          {"usage",
           {{"prompt_tokens", r.prompt_tokens},
            {"completion_tokens", r.completion_tokens},
            {"total_tokens", r.prompt_tokens + r.completion_tokens},
            {"prompt_tokens_details", {{"cached_tokens", r.cached_tokens}}}}},
          {"kvgate", r.raw ? json{{"rescued", true}, {"raw", true}} : json{{"rescued", true}}}};
}

json Gateway::strict_repair(const json& view, const json& body) {
  auto rh = repair_history(view, body.contains("tools") ? body["tools"] : json(),
                           {.convert_late_system_messages = true, .drop_empty_assistant_turns = true});
  return rh.messages;
}

bool Gateway::has_unusable_arguments(const json& response) {
  auto choices = response.find("choices");
  if (choices == response.end() || !choices->is_array()) return false;
  for (const auto& c : *choices) {
    if (!c.is_object() || !c.contains("message") || !c["message"].is_object()) continue;
    const json& m = c["message"];
    if (!m.contains("tool_calls") || !m["tool_calls"].is_array()) continue;
    for (const auto& call : m["tool_calls"]) {
      if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) return true;
      const json& fn = call["function"];
      if (!fn.contains("arguments") || !fn["arguments"].is_string()) return true;
      auto parsed = parse_strict_json(fn["arguments"].get_ref<const std::string&>());
      if (!parsed || !parsed->is_object()) return true;
    }
  }
  return false;
}

}  // namespace kvgate::gateway
