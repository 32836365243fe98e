// A chat turn's commit (Turn::commit): the request's record and the token accounting, the
// prefix break and its cause, the turn's record for the inspector, the session brought to
// this turn (only when it succeeded: a failed turn leaves the session as it was, the client
// will send it again), saved before the client receives the end of the answer, then the
// answer's end, the engine state saved after the turn, and the request log.
#include <fmt/format.h>

#include "gateway/turn_accounting.h"
#include "gateway/turn_steps.h"
#include "util/log.h"
#include "util/time.h"

namespace kvgate::gateway {

using session::PrefixBreak;
using session::Session;
using session::TurnRecord;
using session::build_view;
using session::cause_name;
using session::evidence_name;
using session::first_different_byte;
using session::first_different_message;
using session::locate_break;
using session::recognition_keys;
using session::recomputed_tokens;

using nlohmann::json;

void Turn::commit(const ApiStatus& result) {
  if (!result.ok() && !cancel_.cancelled()) out_.fail(result.error());
  const bool ok = result.ok() && !sent_.saw_error_event;
  view_messages_ = view_.size();
  account(result);
  note_break();
  record_turn();
  s_.metrics.record(rec_);
  if (ok) {
    s_.engine.answered();
    keep_reply();
  } else if (match_.created && session_->conversation.length == 0) {
    s_.sessions.discard_if_empty(session_, 2);  // nothing to keep: the client's retry starts afresh
  }
  count_in_session(ok);
  if (ok) (void)s_.host.persist(*session_, compactions_);
  finish_answer(ok);
  // A paused compaction sent nothing: the slot holds the summary's prompt, not this view.
  if (ok && s_.kv && !managed_.paused) {
    // Ends with the reply as it is sent next time (marked as the template needs it).
    const json next_view = s_.host.upstream_view(build_view(session_->conversation), req_.body);
    const Usage& u = sent_.reply.usage();
    s_.kv->after_turn(slot_, session_->id, generation_, session_->last_view, req_.body,
                       next_view.empty() ? json::object() : next_view.back(),
                       {.prompt_tokens = u.prompt_tokens,
                        .cached_tokens = u.cached_tokens,
                        .completion_tokens = u.completion_tokens,
                        .prefill_ms_per_token = s_.engine.prefill_ms_per_token()});
  }
  log_request(result);
}

void Turn::account(const ApiStatus& result) {
  const Usage& u = sent_.reply.usage();
  if (!result.ok()) {
    // The turn's scope is cancelled only when its client left: whatever failed after that
    // (a replay cut short, say) is the client's leaving, not the engine's or kvgate's failure.
    rec_.status = cancel_.cancelled() ? kClientClosedStatus : result.error().status;
    rec_.error_kind = cancel_.cancelled() ? "client_disconnect" : result.error().code.value_or("upstream");
  } else if (sent_.saw_error_event) {
    rec_.status = 500;
    rec_.error_kind = "engine_stream_error";
  } else {
    rec_.status = 200;
  }
  record_usage(rec_, u);
  rec_.ttft_ms = sent_.ttft_ms;
  rec_.decode_tokens_per_s = u.predicted_per_second;
  rec_.total_ms = util::ms_since(t0_);
  // A paused compaction's figures are the summary request's, not the view's: nothing to learn.
  if (u.known && !managed_.paused) {
    s_.engine.learn_prefill_speed(u.prompt_per_token_ms, u.prefilled_tokens);
    if (counted_ > 0 && u.prompt_tokens > 0) accounting_diff_ = s_.tokens.calibrate(counted_, u.prompt_tokens);
    if (u.prompt_tokens > 0) s_.tokens.learn(req_.body, view_, u.prompt_tokens);
  }
  rec_.session = session_->id;
  rec_.scope = in_.scope;
  if (u.prompt_per_token_ms > 0 && u.prefilled_tokens > 0) rec_.prefill_tokens_per_s = 1000.0 / u.prompt_per_token_ms;
}

void Turn::note_break() {
  // Where did the prompt stop matching the previous one, and why?
  if (!session_->last_view.empty()) {
    diverged_at_ = first_different_message(session_->last_view, view_);
    const Usage& u = sent_.reply.usage();
    const auto by_engine = engine_break({.prefix_kept = diverged_at_ >= session_->last_view.size(),
                                         .usage_known = u.known,
                                         .cached_tokens = u.cached_tokens,
                                         .previous_tokens = session_->last_sent_tokens,
                                         .engine_restarted = session_->engine_generation != s_.engine.generation()});
    if (!cause_ && by_engine) {
      cause_ = by_engine->cause;
      cause_detail_ = by_engine->detail;
    }
  }
  if (!cause_) return;
  s_.metrics.add(fmt::format("prefix_breaks_total{{cause=\"{}\"}}", cause_name(*cause_)));
  util::log_event(util::LogLevel::kInfo, "prefix_break",
                  {{"session", session_->id},
                   {"cause", cause_name(*cause_)},
                   {"detail", cause_detail_},
                   {"message", diverged_at_},
                   {"byte", rendered_.empty() || session_->last_prompt.empty()
                                ? json(nullptr)
                                : json(first_different_byte(session_->last_prompt, rendered_))}});
}

void Turn::record_turn() {
  // Before the session takes this turn's view as its last.
  Session& session = *session_;
  TurnRecord t;
  t.ts_ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
                .count();
  t.status = rec_.status;
  t.messages = request_messages_;
  t.view_messages = view_.size();
  t.slot = slot_;
  t.recognised_by = match_.how;
  t.prompt_tokens = rec_.prompt_tokens;
  t.cached_tokens = rec_.cached_tokens;
  t.prefilled_tokens = rec_.prefilled_tokens;
  t.completion_tokens = rec_.completion_tokens;
  if (rec_.ttft_ms >= 0) t.ttft_ms = rec_.ttft_ms;
  t.total_ms = rec_.total_ms;
  for (const auto& ev : compactions_) {
    t.compactions.push_back({{"level", ev.value("level", "")},
                             {"trigger", ev.value("trigger", "")},
                             {"tokens_before", ev.value("tokens_before", uint64_t{0})},
                             {"tokens_after", ev.value("tokens_after", uint64_t{0})}});
  }
  const bool has_previous = !session.last_view.empty();
  if (has_previous && (cause_ || diverged_at_ < session.last_view.size())) {
    PrefixBreak b = locate_break(session.last_view, view_, session.last_prompt, rendered_);
    b.cause = cause_ ? cause_name(*cause_) : "unexplained";
    b.detail = cause_detail_;
    t.prefix_break = std::move(b);
  }
  std::lock_guard lock(session.mu);
  if (has_previous && rec_.prompt_tokens > 0) {
    // The previous turn's reply is in the engine's cache only when that turn succeeded.
    const TurnRecord* prev = session.turns.last();
    const uint64_t reply = prev && prev->status == 200 ? prev->completion_tokens : 0;
    t.recomputed_tokens = recomputed_tokens(session.last_sent_tokens, reply, t.prompt_tokens, t.cached_tokens);
  }
  session.turns.add(std::move(t));
}

void Turn::keep_reply() {
  Session& session = *session_;
  const uint64_t request_messages = conv_.length;
  conv_.append_reply(sent_.reply.message());
  session.conversation = std::move(conv_);
  session.last_view = std::move(view_);
  session.last_prompt = std::move(rendered_);
  session.last_sent_tokens = sent_.reply.usage().prompt_tokens;
  session.engine_generation = s_.engine.generation();
  {
    std::lock_guard lock(session.mu);
    session.chain = session.conversation.chain;
    session.last_request_messages = request_messages;
  }
  s_.sessions.set_keys(session_,
                        recognition_keys(in_.scope, session.explicit_id, session.conversation, request_messages));
}

void Turn::count_in_session(bool ok) {
  const Usage& u = sent_.reply.usage();
  Session& session = *session_;
  std::lock_guard lock(session.mu);
  auto& c = session.counters;
  ++c.requests;
  if (!ok) ++c.errors;
  c.prompt_tokens += u.prompt_tokens;
  c.cached_tokens += u.cached_tokens;
  c.prefilled_tokens += u.prefilled_tokens;
  c.completion_tokens += u.completion_tokens;
  if (sent_.ttft_ms >= 0) c.ttft_ms_total += sent_.ttft_ms;
  session.slot = slot_;
  if (u.known) {
    session.last_prompt_tokens = u.prompt_tokens;
    session.last_cached_tokens = u.cached_tokens;
  }
  session.view_stats = Session::ViewStats::of(session.conversation);
  if (ok) {
    for (const auto& ev : compactions_) session.compactions.push_back(ev);
  }
  while (session.compactions.size() > 50) session.compactions.pop_front();
}

void Turn::finish_answer(bool ok) {
  if (ok && sent_.final_response) out_.answer(*sent_.final_response, sent_.final_text);
  if (stream_opened_) {
    stream_ended_ = true;
    out_.end_stream(sent_.saw_done);
  }
}

void Turn::log_request(const ApiStatus& result) const {
  const Usage& u = sent_.reply.usage();
  const bool ok = result.ok() && !sent_.saw_error_event;
  json error = nullptr;
  if (!result.ok()) {
    error = result.error().message;
  } else if (sent_.saw_error_event && sent_.reply.error()) {
    error = *sent_.reply.error();
  }
  util::log_event(ok ? util::LogLevel::kInfo : util::LogLevel::kWarn, "request",
                  {{"route", in_.api},
                   {"session", session_->id},
                   {"recognised_by", match_.how},
                   {"evidence", evidence_name(intake_.evidence)},
                   {"rebuilt", intake_.restarted},
                   {"loaded", match_.loaded},
                   {"messages", request_messages_},
                   {"view_messages", view_messages_},
                   {"slot", slot_},
                   {"slot_reassigned", reassigned_},
                   {"kv_restored_tokens", kv_.tokens},
                   {"stream", in_.stream},
                   {"thinking", stable_.thinking},
                   {"reasoning_stripped", stable_.stripped},
                   {"status", rec_.status},
                   {"error", std::move(error)},
                   {"prompt_tokens", u.prompt_tokens},
                   {"counted_tokens", counted_},
                   {"bound_tokens", bound_ ? json(*bound_) : json(nullptr)},
                   {"accounting_diff", accounting_diff_},
                   {"accounting_ms", rec_.accounting_ms},
                   {"cached_tokens", u.cached_tokens},
                   {"prefilled_tokens", u.prefilled_tokens},
                   {"completion_tokens", u.completion_tokens},
                   {"compactions", compactions_.size()},
                   {"history_repairs", repairs_.size()},
                   {"rescued", sent_.rescued},
                   {"overflow_retries", overflow_retries_},
                   {"engine_retries", resend_ ? resend_->resends() : 0},
                   {"queued_ms", ticket_.waited().count()},
                   {"ttft_ms", sent_.ttft_ms},
                   {"total_ms", rec_.total_ms}});
}

}  // namespace kvgate::gateway
