// The client's context management (Turn::manage_context; wire/context_edits.h), served by
// kvgate's own means after the exact count of the view:
//   - clearing old tool results: L1 truncations that keep nothing of the text
//     (session/tool_clearing.h), decided once and kept on later turns, so the prompt changes
//     only where results are cleared and the engine's cache holds everything before that;
//   - a compaction: the engine writes a summary of the whole conversation as a continuation of
//     what it has cached; the conversation becomes the system message and the summary (a user
//     message, summary_message()), which is what the client's next request carries back in
//     place of everything before its compaction block or item, so that request extends the
//     prompt the engine computed for this answer.
#include "gateway/context_summary.h"
#include "gateway/rescued_reply.h"
#include "gateway/turn_steps.h"
#include "session/tool_clearing.h"
#include "util/log.h"
#include "util/time.h"

namespace kvgate::gateway {

using session::BreakCause;
using session::build_view;

using nlohmann::json;

ApiStatus Turn::manage_context() {
  const wire::ContextEdits& edits = in_.edits;
  if (!edits.requested) return {};
  // Without an exact count (the engine could not count) nothing is decided: the request goes
  // as it came, and the answer reports no edit.
  if (counted_ > 0 && edits.clear_tool_uses) clear_tool_uses(*edits.clear_tool_uses);
  if (counted_ > 0 && edits.compact && counted_ > edits.compact->trigger_tokens) {
    KV_TRY(compact_for_client(*edits.compact));
  }
  out_.context_managed(managed_);
  return {};
}

void Turn::clear_tool_uses(const wire::ClearToolUses& spec) {
  const bool triggered = spec.trigger_tool_uses > 0 ? session::tool_results(conv_) > spec.trigger_tool_uses
                                                    : counted_ > spec.trigger_tokens;
  if (!triggered) return;
  auto count_text = [this](const std::string& text) { return s_.tokens.count_text(text); };
  auto cleared = session::clear_tool_results(
      conv_, {.keep = spec.keep, .clear_at_least = spec.clear_at_least, .exclude_tools = spec.exclude_tools},
      count_text);
  if (!cleared.ok()) {
    util::log_event(
        util::LogLevel::kWarn, "context_edit_failed",
        {{"session", session_->id}, {"edit", "clear_tool_uses"}, {"error", cleared.error().message()}});
    return;
  }
  if (cleared->cleared == 0) return;
  const uint64_t before = counted_;
  view_ = s_.host.upstream_view(build_view(conv_), req_.body);
  recount();
  const uint64_t freed = before > counted_ ? before - counted_ : 0;
  managed_.applied_edits.push_back({{"type", "clear_tool_uses_20250919"},
                                    {"cleared_tool_uses", cleared->cleared},
                                    {"cleared_input_tokens", freed}});
  cause_ = BreakCause::kCompaction;
  cause_detail_ = "clear_tool_uses";
  compactions_.push_back(s_.host.record_compaction(*session_, {{"level", "clear_tool_uses"},
                                                               {"trigger", "client"},
                                                               {"tokens_before", before},
                                                               {"tokens_after", counted_},
                                                               {"truncated_messages", cleared->cleared}}));
}

ApiStatus Turn::compact_for_client(const wire::CompactEdit& edit) {
  const uint64_t before = counted_;
  const uint64_t max_tokens = options_.compaction_options.summary_max_tokens;  // as kvgate's own summaries
  // The summary is asked as a continuation of the view; a view that leaves no room for the
  // instruction and the summary is compacted kvgate's way first (its oldest turns summarised).
  if (context_ > 0 && counted_ + session::kSummaryRequestTokens + max_tokens > context_) {
    const uint64_t room = session::kSummaryRequestTokens + max_tokens;
    if (context_ <= room) return context_length_exceeded("the context has no room for a summary");
    KV_TRY(compact_to(context_ - room, "client"));
  }
  json stats = json::object();
  const CompactionCall call = {
      .trigger = "client", .slot = slot_, .tools_text = req_.tools_text, .instructions = edit.instructions};
  auto written =
      s_.host.engine_summary(*session_, req_.body, call, conv_, conv_.length, max_tokens, false, stats);
  std::string summary;
  std::string source = "model";
  if (written.ok() && !written->empty()) {
    summary = std::move(written).value();
    // An answer whose end the engine rejected (its parser refused the text) carries no final
    // figures: what it generated is the summary's length in the engine's own tokens.
    if (!stats.contains("generated_tokens")) {
      if (auto n = s_.tokens.count_text(summary); n.ok()) stats["generated_tokens"] = *n;
    }
  } else {
    summary = session::extractive_summary(conv_, conv_.length, static_cast<size_t>(max_tokens) * 3);
    source = "extractive";
  }
  conv_ = compacted_for_client(conv_, summary);
  view_ = s_.host.upstream_view(build_view(conv_), req_.body);
  recount();
  managed_.summary = summary;
  managed_.paused = edit.pause;
  managed_.summary_usage = stats;
  cause_ = BreakCause::kCompaction;
  cause_detail_ = "client";
  json event = {{"level", "client"},        {"trigger", "client"},      {"tokens_before", before},
                {"tokens_after", counted_}, {"summary_source", source}, {"summary_request", stats}};
  if (!written.ok()) event["summary_error"] = written.error().message();
  compactions_.push_back(s_.host.record_compaction(*session_, std::move(event)));
  return {};
}

void Turn::answer_compaction() {
  // Nothing sampled: the answer is the compaction block alone, its usage the summary's.
  Rescue r;
  r.message = {{"role", "assistant"}, {"content", ""}};
  r.finish_reason = "compaction";
  const json& s = managed_.summary_usage;
  r.usage.prompt_tokens = s.value("prompt_tokens", uint64_t{0});
  r.usage.cached_tokens = s.value("cached_tokens", uint64_t{0});
  r.usage.prefilled_tokens = r.usage.prompt_tokens - std::min(r.usage.cached_tokens, r.usage.prompt_tokens);
  r.usage.completion_tokens = s.value("generated_tokens", uint64_t{0});
  r.usage.known = s.contains("prompt_tokens");
  const int64_t created = util::unix_seconds_now();
  json response = rescued_response(r, model_name(), created);
  response.erase("kvgate");
  sent_ = SendOutcome();
  sent_.status = 200;
  sent_.reply.set_response(response);
  sent_.reply.set_usage(r.usage);
  if (!in_.stream) {
    sent_.final_response = std::move(response);
    return;
  }
  out_.open_stream(cancel_);
  stream_opened_ = true;
  if (!out_.begin_stream()) return;
  const std::string id = response.value("id", "");
  for (const json& chunk : rescued_chunks(r, "", id, model_name(), created, in_.include_usage)) {
    if (!out_.kvgate_chunk(chunk)) return;
  }
  sent_.saw_done = true;
}

}  // namespace kvgate::gateway
