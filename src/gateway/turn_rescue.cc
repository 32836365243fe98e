// Rescue of a generation the engine rejected (Turn::rescue): the rendered prompt is replayed
// as a raw, streamed completion with the same seed and sampling settings (already cached, so
// it costs decoding only), and the text is parsed leniently for tool calls
// (rescue/tool_call_parse.h). See docs/RESCUE.md for the measurements behind it.
#include <fmt/format.h>

#include "gateway/rescue_replay.h"
#include "gateway/turn_steps.h"
#include "rescue/relaxed_json.h"
#include "rescue/tool_call_parse.h"
#include "util/json.h"
#include "util/log.h"

namespace kvgate::gateway {

using rescue::ToolCallParseResult;
using rescue::call_issue_name;
using rescue::parse_tool_calls;
using rescue::sanitize_utf8;

using nlohmann::json;

namespace {

uint64_t count_of(int n) { return static_cast<uint64_t>(std::max(0, n)); }

// Neither the engine's parser, the lenient parser nor the replay gave a tool call or
// readable text: the model's output is unusable, the engine is not broken. The client still
// gets an answer — what text there was, sanitised — marked as rescued raw.
Rescue raw_rescue(const ReplayText& text) {
  Rescue r;
  r.message = {{"role", "assistant"}, {"content", sanitize_utf8(text.text())}};
  r.finish_reason = "stop";
  r.raw = true;
  r.prompt_tokens = count_of(text.tokens_evaluated());
  // What the engine read from its cache, as for any rescue (a raw one reported 0: a false
  // "slot eviction" for a prompt the engine had reused whole).
  r.cached_tokens = std::min<uint64_t>(r.prompt_tokens, count_of(text.tokens_cached()));
  r.completion_tokens = count_of(text.tokens_predicted());
  return r;
}

// A server that cannot render a request (no /apply-template: vLLM, SGLang, a router) cannot
// replay it either: the client gets the text it already has, marked raw, without usage.
Rescue unreplayable_rescue(const std::string& streamed) {
  Rescue r;
  r.message = {{"role", "assistant"}, {"content", sanitize_utf8(streamed)}};
  r.finish_reason = "stop";
  r.raw = true;
  r.usage_known = false;
  return r;
}

bool cannot_render(int status) { return status == 404 || status == 405 || status == 501; }

}  // namespace

Result<Rescue> Turn::rescue(const std::string& reason, const std::string& streamed) {
  // The request as it was sent, rendered by the engine's template.
  auto rendered = g_.upstream_->call("POST", "/apply-template", upstream_text_, std::chrono::seconds(60), &cancel_);
  if (!rendered.ok()) return Error("rescue: " + rendered.error().message);
  if (cannot_render(rendered->status)) {
    g_.metrics_.add("rescues_total{outcome=\"raw\"}");
    util::log_event(
        util::LogLevel::kWarn, "rescue",
        {{"reason", reason},
         {"outcome", "raw"},
         {"replay_error",
          fmt::format("the server cannot render the request ({}): nothing replayed", rendered->status)},
         {"raw", sanitize_utf8(streamed.substr(0, 2000))}});
    return unreplayable_rescue(streamed);
  }
  auto rj = json::parse(rendered->body, nullptr, false);
  if (rendered->status != 200 || rj.is_discarded() || !rj.contains("prompt") || !rj["prompt"].is_string()) {
    return Error(fmt::format("rescue: the engine could not render the request ({})", rendered->status));
  }
  const json replay = replay_completion_body(req_.body, rj["prompt"].get<std::string>());
  ReplayText text;
  const EventStreamEnd stream = stream_events(
      *g_.upstream_, "/completion", util::json_text(replay), [&](const std::string& data) { text.add_event(data); },
      g_.upstream_timeout(0, false), &cancel_);
  if (stream.failure) return Error("rescue: " + stream.failure->message);
  const bool refused_output = stream.status != 200 && is_output_parse_error(stream.status, stream.error_body);
  if (stream.status != 200 && !refused_output) {
    return Error(fmt::format("rescue: the replay was refused ({}): {}", stream.status, stream.error_body.substr(0, 300)));
  }
  if (refused_output || (text.text().empty() && text.failed())) {
    g_.metrics_.add("rescues_total{outcome=\"raw\"}");
    util::log_event(util::LogLevel::kWarn, "rescue",
                    {{"reason", reason},
                     {"outcome", "raw"},
                     {"replay_status", stream.status},
                     {"replay_error", sanitize_utf8(stream.error_body.substr(0, 300))},
                     {"raw", sanitize_utf8(text.text().substr(0, 2000))}});
    return raw_rescue(text);
  }

  const json tools = req_.body.contains("tools") ? req_.body["tools"] : json::array();
  ToolCallParseResult parsed = parse_tool_calls(text.text(), tools, {.first_id = static_cast<size_t>(conv_.length)});
  Rescue r;
  r.message = parsed.message;
  r.finish_reason = parsed.call_count() > 0 ? "tool_calls" : (text.stopped_by_limit() ? "length" : "stop");
  r.prompt_tokens = count_of(text.tokens_evaluated());
  r.cached_tokens = std::min<uint64_t>(r.prompt_tokens, count_of(text.tokens_cached()));
  r.completion_tokens = count_of(text.tokens_predicted());
  r.calls = parsed.call_count();
  json notes = json::array();
  for (const auto& n : parsed.notes) {
    notes.push_back({{"issue", std::string(call_issue_name(n.issue))}, {"call", n.call}, {"detail", n.detail}});
  }
  const std::string outcome = r.calls > 0 ? "tool_calls" : "content";
  g_.metrics_.add(fmt::format("rescues_total{{outcome=\"{}\"}}", outcome));
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

}  // namespace kvgate::gateway
