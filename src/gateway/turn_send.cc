// A chat turn's send step (Turn::send): attempts until one is final. An attempt that fails
// before anything reached the client is repeated where that can help:
//   - the engine could not be reached or died before answering: once more, on the restarted
//     engine;
//   - the reply filled the context and failed (ik; nothing relayed): once more, with the
//     reply limited to the room the exactly counted prompt leaves;
//   - the engine's template refused the history: once more with the strict repairs, which
//     the session then keeps;
//   - the engine refused the prompt as larger than its context: compacted harder and sent
//     again, up to max_overflow_retries times.
// A whole (non-streamed) answer is read here; a stream in turn_stream.cc.
#include <fmt/format.h>

#include "gateway/disconnect_watch.h"
#include "upstream/engine_errors.h"
#include "upstream/finish_reason.h"
#include "upstream/model_id.h"
#include "gateway/turn_steps.h"
#include "util/json.h"
#include "util/log.h"
#include "util/time.h"

namespace kvgate::gateway {

using session::apply_empty_content_fallback;

using nlohmann::json;

// The outcome's flags from an engine's error answer (upstream/engine_errors.h).
EngineErrorInfo note_engine_error(SendOutcome& out, int status, std::string_view error) {
  EngineErrorInfo e = classify_engine_error(status, error);
  out.overflow = e.kind == EngineErrorKind::kPromptTooLong;
  out.template_error = e.kind == EngineErrorKind::kTemplate;
  out.context_filled = e.kind == EngineErrorKind::kContextFilled;
  if (out.overflow) {
    out.overflow_prompt_tokens = e.prompt_tokens;
    out.overflow_context = e.n_ctx;
  }
  return e;
}

ApiStatus Turn::send() {
  if (in_.stream) {
    out_.open_stream(cancel_);
    stream_opened_ = true;
  }
  if (plan::fails_when_reply_fills_context(options_.engine_fork) && counted_ > 0) cap_reply(counted_);
  in_flight_ = s_.engine.fatal().enter(digest_);
  resend_.emplace(s_.engine, digest_);
  for (;;) {
    resend_->before();
    sent_ = attempt();
    if (retry_on_restarted_engine() || retry_with_reply_cap() || retry_with_strict_template()) continue;
    if (!sent_.overflow || !options_.compaction || overflow_retries_ >= options_.max_overflow_retries) break;
    ++overflow_retries_;
    s_.metrics.add("overflow_retries_total");
    // The engine counted more than we planned for (or its context is smaller): aim lower.
    KV_TRY(compact_to(overflow_target(counted_, sent_.overflow_prompt_tokens, sent_.overflow_context,
                                      options_.high_watermark_fraction, options_.low_watermark_fraction, reserve_),
                      "overflow"));
  }
  in_flight_.release();
  return outcome();
}

bool Turn::retry_on_restarted_engine() {
  // The engine failed before any of its answer reached the client (it was down, or died
  // during the prefill): send the request again once the engine is back.
  if (!sent_.upstream_failure || sent_.relayed) return false;
  switch (resend_->again(*sent_.upstream_failure, cancel_, [this] { return out_.client_gone(); })) {
    case EngineResend::Verdict::kAgain:
      return true;
    case EngineResend::Verdict::kTookEngineDown:
      sent_.failure = fatal_request_error(false);
      return false;
    case EngineResend::Verdict::kNo:
      break;
  }
  return false;
}

bool Turn::retry_with_reply_cap() {
  // Generated until the context was full and failed (nothing reached the client): again,
  // limited to the room the exactly counted prompt leaves.
  if (!sent_.context_filled || in_.stream || filled_retried_ || cancel_.cancelled()) return false;
  filled_retried_ = true;
  if (counted_ == 0) recount();
  if (!cap_reply(counted_)) return false;
  s_.metrics.add("context_filled_retries_total");
  return true;
}

bool Turn::retry_with_strict_template() {
  // The model's template refuses this history (a late system message, an empty assistant
  // turn, ...): repair more strictly, and keep doing so for this session.
  if (!sent_.template_error || template_retried_ || session_->template_repairs) return false;
  template_retried_ = true;
  session_->template_repairs = true;
  s_.metrics.add("history_repairs_total{kind=\"template_retry\"}");
  return true;
}

bool Turn::cap_reply(uint64_t prompt) {
  // A reply may use the rest of the slot's context and no more. An engine that fails a reply
  // that fills it (ik: an error after the whole generation) is given that room as max_tokens
  // once the prompt is counted exactly, so the reply ends as "length" instead.
  std::optional<int64_t> limit = req_.max_tokens;
  if (!limit && options_.default_max_tokens > 0) limit = static_cast<int64_t>(options_.default_max_tokens);
  const std::optional<uint64_t> room = reply_room(context_, prompt, limit);
  if (!room) return false;
  req_.body.erase("max_completion_tokens");
  req_.body.erase("n_predict");
  req_.body["max_tokens"] = *room;
  return true;
}

ApiStatus Turn::outcome() const {
  if (!sent_.failure) return {};
  if (!sent_.overflow) return *sent_.failure;
  // ik's refusal carries no figures: the context is then the one kvgate planned or asked for.
  const uint64_t n_ctx = sent_.overflow_context > 0 ? sent_.overflow_context : context_;
  const std::string size = counted_ > 0 ? fmt::format(" ({} tokens)", counted_) : std::string();
  const std::string tried = options_.compaction ? fmt::format("even after {} compactions", overflow_retries_)
                                                : std::string("and compaction is off (--compaction off)");
  return context_length_exceeded(fmt::format("the conversation{} does not fit the engine's context of {} tokens {}: {}",
                                             size, n_ctx, tried, sent_.failure->message));
}

SendOutcome Turn::attempt() {
  // The view goes into the body as the messages (strictly repaired for a template that needs
  // it), written straight into the request's text.
  const json strict = session_->template_repairs ? strict_repair(view_, req_.body) : json();
  const json& messages = session_->template_repairs ? strict : view_;
  upstream_text_ = util::json_text_with(req_.body, "messages", messages, {"tools", req_.tools_text});
  counters_before_ = read_engine_counters(false);
  if (util::log_enabled(util::LogLevel::kDebug)) {
    json body = req_.body;
    body["messages"] = messages;
    util::log_event(util::LogLevel::kDebug, "upstream_request", {{"session", session_->id}, {"body", body}});
  }
  return in_.stream ? attempt_stream() : attempt_whole();
}

SendOutcome Turn::attempt_whole() {
  SendOutcome out;
  DisconnectWatch watch([this] { return out_.client_gone(); }, cancel_);
  auto res = s_.engine.upstream().call("POST", "/v1/chat/completions", upstream_text_,
                                s_.engine.upstream_timeout(prompt_estimate(), true), &cancel_);
  std::optional<std::string> rescue_reason;
  if (!res.ok()) {
    out.failure = s_.engine.from_upstream_error(res.error());
    out.upstream_failure = res.error().kind;
  } else {
    read_whole(*res, out, rescue_reason);
  }
  if (rescue_reason && !cancel_.cancelled()) rescue_whole(out, *rescue_reason);
  return out;
}

void Turn::read_whole(UpstreamResponse& r, SendOutcome& out, std::optional<std::string>& rescue_reason) {
  out.status = r.status;
  if (r.status != 200) {
    const EngineErrorInfo e = note_engine_error(out, r.status, r.body);
    out.failure = s_.engine.from_engine_answer(r.status, r.body);
    if (e.kind == EngineErrorKind::kOutput) rescue_reason = e.message;
    return;
  }
  json j = json::parse(r.body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    out.failure = bad_gateway("the engine answered with a body that is not JSON");
    if (options_.on_engine_failure) options_.on_engine_failure("the engine answered 200 with a body that is not JSON");
    return;
  }
  // The engine names the model by its file's path: the client gets the id it knows.
  const bool renamed = rename_model(j, model_name());
  if (has_unusable_arguments(j)) {
    rescue_reason = "the engine returned tool-call arguments that are not a JSON object";
    out.reply.set_response(j);
    out.final_response = std::move(j);  // kept if the rescue fails
    if (!renamed) out.final_text = std::move(r.body);
    return;
  }
  FinishReasonFix finish(plan::says_stop_at_max_tokens(options_.engine_fork), req_.body);
  finish.fix_response(j);
  out.reply.set_response(j);
  out.ttft_ms = util::ms_since(t0_);
  const bool changed = apply_empty_content_fallback(j, options_.thinking) || finish.rewrote() || renamed;
  if (!changed) out.final_text = std::move(r.body);
  out.final_response = std::move(j);
}

void Turn::rescue_whole(SendOutcome& out, const std::string& reason) {
  auto rescued = rescue(reason, out.reply);
  if (!rescued.ok()) {
    s_.metrics.add("rescues_total{outcome=\"failed\"}");
    if (out.failure) out.failure->message += " (rescue failed: " + rescued.error().message() + ")";
    return;
  }
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch());
  json response = rescued_response(*rescued, model_name(), now.count());
  out.reply = ReplyAccumulator();
  out.reply.set_response(response);
  out.reply.set_usage(rescued->usage);
  out.final_response = std::move(response);
  out.final_text.clear();
  out.failure.reset();
  out.status = 200;
  out.rescued = true;
  out.ttft_ms = util::ms_since(t0_);
}

}  // namespace kvgate::gateway
