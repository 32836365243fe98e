// Rescue of a generation the engine rejected (Turn::rescue): the rendered prompt is replayed
// as a raw, streamed completion with the same seed and sampling settings (already cached, so
// it costs decoding only), and the text is parsed leniently for tool calls
// (rescue/tool_call_parse.h). See docs/RESCUE.md for the measurements behind it.
#include <thread>

#include <fmt/format.h>

#include "upstream/rescue_replay.h"
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

// The replay's figures: the growth of the engine's counters over it when that adds up to its
// prompt (its final event, with its figures, is lost when the engine refuses its output too),
// else what its stream said.
// Whether the counters' growth is the work of one request on a prompt of `prompt` tokens.
bool counts_one_prompt(const EngineCounters& growth, uint64_t prompt) {
  return growth.cached_known ? growth.prompt_computed + growth.prompt_cached == prompt
                             : growth.prompt_computed <= prompt;
}

ReplayFigures replay_figures(const ReplayText& text, const std::optional<EngineCounters>& growth) {
  const uint64_t prompt = count_of(text.tokens_evaluated());
  if (growth && prompt > 0 && counts_one_prompt(*growth, prompt)) {
    return {.computed_tokens = growth->prompt_computed, .generated_tokens = growth->generated, .replayed = true};
  }
  return {.computed_tokens = count_of(text.tokens_computed()),
          .generated_tokens = count_of(text.tokens_predicted()),
          .replayed = true};
}

// The output limit the engine was given, if any.
std::optional<uint64_t> output_cap(const json& body) {
  for (const char* key : {"max_tokens", "max_completion_tokens", "n_predict"}) {
    if (auto it = body.find(key); it != body.end() && it->is_number_integer() && it->get<int64_t>() > 0) {
      return static_cast<uint64_t>(it->get<int64_t>());
    }
  }
  return std::nullopt;
}

json figures_log(const Usage& u) {
  if (!u.known) return nullptr;
  return {{"prompt_tokens", u.prompt_tokens},
          {"cached_tokens", u.cached_tokens},
          {"computed_tokens", u.prefilled_tokens},
          {"completion_tokens", u.completion_tokens}};
}

// Neither the engine's parser, the lenient parser nor the replay gave a tool call or
// readable text: the model's output is unusable, the engine is not broken. The client still
// gets an answer — what text there was, sanitised — marked as rescued raw.
Rescue raw_rescue(const ReplayText& text) {
  Rescue r;
  r.message = {{"role", "assistant"}, {"content", sanitize_utf8(text.text())}};
  r.finish_reason = text.stopped_by_limit() ? "length" : "stop";
  r.raw = true;
  return r;
}

// A server that cannot render a request (no /apply-template: vLLM, SGLang, a router) cannot
// replay it either: the client gets the text it already has, marked raw.
Rescue unreplayable_rescue(const std::string& streamed) {
  Rescue r;
  r.message = {{"role", "assistant"}, {"content", sanitize_utf8(streamed)}};
  r.finish_reason = "stop";
  r.raw = true;
  return r;
}

bool cannot_render(int status) { return status == 404 || status == 405 || status == 501; }

}  // namespace

std::optional<EngineCounters> Turn::read_engine_counters(bool after_attempt) {
  if (counters_missing_) return std::nullopt;
  // An attempt's generated tokens are counted when its slot is released, which can come after
  // its answer (an output refused midway is cancelled): wait for the slot to be idle first.
  for (int i = 0; after_attempt && i < 100 && !cancel_.cancelled(); ++i) {
    auto slots = s_.engine.upstream().call("GET", "/slots", "", std::chrono::seconds(2), &cancel_);
    if (!slots.ok() || slots->status != 200) break;
    const json list = json::parse(slots->body, nullptr, false);
    bool busy = false;
    for (const auto& s : list.is_array() ? list : json::array()) {
      if (s.is_object() && s.value("id", -1) == slot_) busy = s.value("is_processing", false);
    }
    if (!busy) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  auto res = s_.engine.upstream().call("GET", "/metrics", "", std::chrono::seconds(2), &cancel_);
  std::optional<EngineCounters> c;
  if (res.ok() && res->status == 200) c = parse_engine_counters(res->body);
  // An engine without --metrics (or not llama-server) is not asked again this turn.
  if (!c && res.ok()) counters_missing_ = true;
  return c;
}

RefusedAttempt Turn::refused_attempt(const ReplyAccumulator& refused, const std::optional<EngineCounters>& growth,
                                     uint64_t replayed_prompt) const {
  RefusedAttempt a;
  if (const Usage& u = refused.usage(); u.known) {
    // The engine answered with its figures (tool-call arguments that are not an object).
    return {.prompt_tokens = u.prompt_tokens, .cached_tokens = u.cached_tokens, .computed_tokens = u.prefilled_tokens,
            .prompt_known = true, .generated_tokens = u.completion_tokens, .generated_known = true};
  }
  const PromptProgress& p = refused.prompt_progress();
  if (p.known) {
    a.prompt_tokens = p.total;
    a.cached_tokens = std::min(p.cache, p.total);
    a.computed_tokens = p.total - a.cached_tokens;
    a.prompt_known = true;
  }
  // The counters' growth is this attempt's work when it adds up to this prompt (no other
  // request worked on the engine meanwhile). An engine that does not count reuse (ik) counts
  // the computed part only: the rest of the prompt was reused.
  const uint64_t prompt = p.known ? p.total : replayed_prompt;
  if (growth && prompt > 0 && counts_one_prompt(*growth, prompt)) {
    a.prompt_tokens = prompt;
    a.computed_tokens = growth->prompt_computed;
    a.cached_tokens = prompt - a.computed_tokens;
    a.prompt_known = true;
    a.generated_tokens = growth->generated;
    a.generated_known = true;
  }
  return a;
}

Result<Rescue> Turn::rescue(const std::string& reason, const ReplyAccumulator& refused) {
  const std::string& streamed = refused.content();
  // What the refused attempt cost the engine, before the replay adds to its counters.
  std::optional<EngineCounters> growth;
  std::optional<EngineCounters> at_replay;
  if (counters_before_) {
    at_replay = read_engine_counters(true);
    if (at_replay) growth = counters_growth(*counters_before_, *at_replay);
  }
  // The request as it was sent, rendered by the engine's template.
  auto rendered = s_.engine.upstream().call("POST", "/apply-template", upstream_text_, std::chrono::seconds(60), &cancel_);
  if (!rendered.ok()) return Error("rescue: " + rendered.error().message);
  if (cannot_render(rendered->status)) {
    s_.metrics.add("rescues_total{outcome=\"raw\"}");
    Rescue r = unreplayable_rescue(streamed);
    r.usage = rescued_usage(refused_attempt(refused, growth, 0), {}, false);
    util::log_event(
        util::LogLevel::kWarn, "rescue",
        {{"reason", reason},
         {"outcome", "raw"},
         {"replay_error",
          fmt::format("the server cannot render the request ({}): nothing replayed", rendered->status)},
         {"figures", figures_log(r.usage)},
         {"raw", sanitize_utf8(streamed.substr(0, 2000))}});
    return r;
  }
  auto rj = json::parse(rendered->body, nullptr, false);
  if (rendered->status != 200 || rj.is_discarded() || !rj.contains("prompt") || !rj["prompt"].is_string()) {
    return Error(fmt::format("rescue: the engine could not render the request ({})", rendered->status));
  }
  const json replay = replay_completion_body(req_.body, rj["prompt"].get<std::string>());
  ReplayText text;
  const EventStreamEnd stream = stream_events(
      s_.engine.upstream(), "/completion", util::json_text(replay), [&](const std::string& data) { text.add_event(data); },
      s_.engine.upstream_timeout(0, false), &cancel_);
  if (stream.failure) return Error("rescue: " + stream.failure->message);
  const bool refused_output = stream.status != 200 && is_output_parse_error(stream.status, stream.error_body);
  if (stream.status != 200 && !refused_output) {
    return Error(fmt::format("rescue: the replay was refused ({}): {}", stream.status, stream.error_body.substr(0, 300)));
  }
  const RefusedAttempt first = refused_attempt(refused, growth, count_of(text.tokens_evaluated()));
  std::optional<EngineCounters> replay_growth;
  if (at_replay) {
    if (auto now = read_engine_counters(true)) replay_growth = counters_growth(*at_replay, *now);
  }
  const bool raw = refused_output || (text.text().empty() && text.failed());
  Rescue r;
  ToolCallParseResult parsed;
  if (raw) {
    r = raw_rescue(text);
  } else {
    const json tools = req_.body.contains("tools") ? req_.body["tools"] : json::array();
    parsed = parse_tool_calls(text.text(), tools, {.first_id = static_cast<size_t>(conv_.length)});
    r.message = parsed.message;
    r.calls = parsed.call_count();
    r.finish_reason = r.calls > 0 ? "tool_calls" : (text.stopped_by_limit() ? "length" : "stop");
  }
  const bool delivered = rescue_delivered(r, streamed);
  if (!delivered) {
    // The client keeps the refused attempt's text: the reply, its end and its figures are that
    // attempt's (cut at its output limit: "length").
    const std::optional<uint64_t> cap = output_cap(req_.body);
    r.message = {{"role", "assistant"}, {"content", streamed}};
    r.calls = 0;
    r.finish_reason = first.generated_known && cap && first.generated_tokens >= *cap ? "length" : "stop";
  }
  r.usage = rescued_usage(first, replay_figures(text, replay_growth), delivered);
  const std::string outcome = raw ? "raw" : (r.calls > 0 ? "tool_calls" : "content");
  s_.metrics.add(fmt::format("rescues_total{{outcome=\"{}\"}}", outcome));
  json notes = json::array();
  for (const auto& n : parsed.notes) {
    notes.push_back({{"issue", std::string(call_issue_name(n.issue))}, {"call", n.call}, {"detail", n.detail}});
  }
  util::log_event(raw ? util::LogLevel::kWarn : util::LogLevel::kInfo, "rescue",
                  {{"reason", reason},
                   {"outcome", outcome},
                   {"calls", r.calls},
                   {"delivered", delivered ? "replay" : "refused_attempt"},
                   {"figures", figures_log(r.usage)},
                   {"replay_cached_tokens", text.tokens_cached()},
                   {"replay_computed_tokens", text.tokens_computed()},
                   {"replay_status", stream.status},
                   {"replay_error", sanitize_utf8(stream.error_body.substr(0, 300))},
                   {"raw", sanitize_utf8(text.text().substr(0, 2000))},
                   {"replay_failed_midway", text.failed()},
                   {"notes", notes}});
  return r;
}

}  // namespace kvgate::gateway
