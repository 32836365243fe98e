// A chat turn's budget step (Turn::budget, turn_steps.h): the upstream view's prompt tokens —
// counted exactly with the engine's template and tokenizer only near the high watermark,
// bounded otherwise — and a compaction when the prompt and the reply's room would pass the
// high watermark. The token arithmetic it decides by is pure (turn_budget.h, first below);
// the step's compaction (compact_to) and count (recount) also serve the client's context
// management (turn_context.cc) and the send step's retry after an overflow (turn_send.cc).
#include "gateway/turn_budget.h"

#include <algorithm>

#include "gateway/turn_steps.h"
#include "session/stabiliser.h"
#include "util/json.h"
#include "util/log.h"
#include "util/time.h"

namespace kvgate::gateway {

using session::BreakCause;
using session::build_view;

using nlohmann::json;

namespace {

uint64_t fraction_of(uint64_t n, double fraction) {
  return static_cast<uint64_t>(static_cast<double>(n) * fraction);
}

}  // namespace

Watermarks watermarks(uint64_t context, std::optional<uint64_t> high_tokens, double high_fraction,
                      double low_fraction) {
  Watermarks w;
  w.high = high_tokens.value_or(fraction_of(context, high_fraction));
  w.low = fraction_of(w.high, low_fraction);
  return w;
}

uint64_t reply_reserve(std::optional<int64_t> max_tokens, uint64_t default_reserve) {
  return max_tokens && *max_tokens > 0 ? static_cast<uint64_t>(*max_tokens) : default_reserve;
}

uint64_t compaction_target(uint64_t low, uint64_t reserve) { return low > reserve ? low - reserve : low; }

std::optional<uint64_t> extended_prompt_bound(const nlohmann::json& last_view, uint64_t last_tokens,
                                              const nlohmann::json& view) {
  if (last_tokens == 0 || !last_view.is_array() || last_view.empty() || !view.is_array()) return std::nullopt;
  if (session::first_different_message(last_view, view) != last_view.size()) return std::nullopt;
  uint64_t added = 0;
  for (size_t i = last_view.size(); i < view.size(); ++i) added += 16 + util::json_text(view[i]).size();
  return last_tokens + added + 64;
}

bool needs_exact_count(bool count_tokens, std::optional<uint64_t> bound, bool compaction, uint64_t high,
                       uint64_t reserve) {
  return count_tokens && (!bound || (compaction && high > 0 && *bound + reserve > high));
}

uint64_t overflow_target(uint64_t counted, uint64_t engine_prompt_tokens, uint64_t engine_context,
                         double high_fraction, double low_fraction, uint64_t reserve) {
  uint64_t target = std::max(counted, engine_prompt_tokens) * 6 / 10;
  if (engine_context > 0) {
    const uint64_t engine_low =
        static_cast<uint64_t>(static_cast<double>(engine_context) * high_fraction * low_fraction);
    target = std::min(target, compaction_target(engine_low, reserve));
  }
  return target;
}

std::optional<uint64_t> reply_room(uint64_t context, uint64_t prompt, std::optional<int64_t> max_tokens) {
  if (context == 0 || prompt == 0 || prompt + 1 >= context) return std::nullopt;
  const uint64_t room = context - prompt - 1;
  if (max_tokens && *max_tokens > 0 && static_cast<uint64_t>(*max_tokens) <= room) return std::nullopt;
  return room;
}

// The step, and the compaction and count the later steps reuse.

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
  KV_ASSIGN_OR_RETURN(json event, s_.host.compact_conversation(
                                      *session_, conv_, req_.body,
                                      {.target = target,
                                       .first_new = intake_.first_new,
                                       .trigger = trigger,
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
