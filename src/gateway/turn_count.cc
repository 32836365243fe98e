// A chat turn's budget (Turn::budget): the upstream view's prompt tokens — counted
// exactly with the engine's template and tokenizer only near the high watermark, bounded
// otherwise (turn_budget.h) — and a compaction when the prompt and the reply's room would
// pass the high watermark.
#include <fmt/format.h>

#include "gateway/turn_steps.h"
#include "util/log.h"
#include "util/time.h"

namespace kvgate::gateway {

using session::BreakCause;
using session::build_view;

using nlohmann::json;

ApiStatus Turn::budget() {
  context_ = s_.host.context_tokens();
  marks_ = watermarks(context_, options_.high_watermark_tokens, options_.high_watermark_fraction,
                      options_.low_watermark_fraction);
  reserve_ = reply_reserve(req_.max_tokens, options_.reply_reserve_tokens);
  if (!options_.always_count_tokens && session_->engine_generation == generation_) {
    bound_ = extended_prompt_bound(session_->last_view, session_->last_sent_tokens, view_);
  }
  const bool front_moved = intake_.window_front_moved && options_.compaction && marks_.high > 0;
  // Context management decides on the exact count.
  if (front_moved || in_.edits.requested ||
      needs_exact_count(options_.count_tokens, bound_, options_.compaction, marks_.high, reserve_)) {
    const auto t0 = Clock::now();
    auto count = s_.tokens.count(req_.body, view_, req_.tools_text);
    rec_.accounting_ms = util::ms_since(t0);
    if (count.ok()) {
      counted_ = count->tokens;
      rendered_ = std::move(count->prompt);
    } else {
      util::log_event(util::LogLevel::kWarn, "token_accounting_failed",
                      {{"session", session_->id}, {"error", count.error().message()}});
      if (is_count_time_limit(count.error())) return request_too_large(count.error().message());
    }
  }
  KV_TRY(manage_context());
  if (options_.compaction && marks_.high > 0 && counted_ > 0 && counted_ + reserve_ > marks_.high) {
    KV_TRY(compact_to(compaction_target(marks_.low, reserve_), "watermark"));
  } else if (front_moved && counted_ > 0 && !options_.engine_shifts) {
    // The client's window dropped messages kvgate still sent, and this engine does not move
    // cached chunks: the prompt's start changed, so this turn recomputes it anyway. Dropping
    // more now (as much as a compaction would, at most half the view) spares the next turns
    // that cost while the window slides on. An engine that shifts recomputes only the
    // increment, so there the prompt is the client's window, all of it.
    const uint64_t drop = std::min(marks_.high - marks_.low, counted_ / 2);
    const uint64_t target = std::min(counted_ - drop, compaction_target(marks_.low, reserve_));
    if (target < counted_) KV_TRY(compact_to(target, "window"));
  }
  return {};
}

ApiStatus Turn::compact_to(uint64_t target, const char* trigger) {
  KV_ASSIGN_OR_RETURN(json event,
                      s_.host.compact_conversation(*session_, conv_, req_.body,
                                              {.target = target, .first_new = intake_.first_new, .trigger = trigger,
                                               .slot = slot_,
                                               .summaries = !(conv_.client_windows && !session_->explicit_id),
                                               // short of the target, a prompt that still fits with the reply's room
                                               .fit = context_ > reserve_ ? context_ - reserve_ : 0,
                                               .tools_text = req_.tools_text}));
  cause_ = BreakCause::kCompaction;
  cause_detail_ = event.value("level", "");
  compactions_.push_back(std::move(event));
  view_ = s_.host.upstream_view(build_view(conv_), req_.body);
  recount();
  return {};
}

void Turn::recount() {
  auto count = s_.tokens.count(req_.body, view_, req_.tools_text);
  if (!count.ok()) return;  // the previous count stands
  counted_ = count->tokens;
  rendered_ = std::move(count->prompt);
}

uint64_t Turn::prompt_estimate() const { return counted_ > 0 ? counted_ : bound_.value_or(0); }

}  // namespace kvgate::gateway
