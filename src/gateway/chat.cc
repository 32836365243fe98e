// The chat-completions flow (Gateway::chat): recognise the conversation, bring the client's
// messages into the session's conversation (stabilised), build the upstream view, compact
// it when it would pass the high watermark, send it (compacting harder and retrying when
// the engine still overflows), save the session, then finish the client's answer.
#include <thread>

#include <fmt/format.h>

#include "gateway/chat_request.h"
#include "gateway/gateway.h"
#include "gateway/request_limits.h"
#include "rescue/history_repair.h"
#include "session/intake.h"
#include "session/normalize.h"
#include "util/json.h"
#include "util/log.h"

namespace kvgate::gateway {

using http::HeaderList;
using rescue::HistoryRepair;
using rescue::repair_history;
using rescue::repair_kind_name;
using session::CompactionResult;
using session::Intake;
using session::RequestKeys;
using session::SummarizeFn;
using session::apply_thinking_policy;
using session::build_view;
using session::cause_name;
using session::compact;
using session::evidence_name;
using session::first_different_byte;
using session::first_different_message;
using session::recognition_keys;
using session::reorder_tool_results;
using session::strip_history_reasoning;
using session::take_in;

using nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

const HeaderList kJson = {{"Content-Type", "application/json"}};

// The conversation's id when the client names it: the X-Session-Id header, the
// `prompt_cache_key` field, or the `user` field (sanitised; scoped to the key by the table).
std::optional<std::pair<std::string, std::string>> explicit_session(const HttpRequest& request, const ChatRequest& chat) {
  auto clean = [](std::string_view v) -> std::optional<std::string> {
    if (v.empty() || v.size() > 200) return std::nullopt;
    for (char c : v) {
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f || c == '/') return std::nullopt;
    }
    return std::string(v);
  };
  if (auto h = request.header("x-session-id")) {
    if (auto id = clean(*h)) return std::make_pair(*id, std::string("header"));
  }
  if (auto key = chat.body.find("prompt_cache_key"); key != chat.body.end() && key->is_string()) {
    if (auto id = clean(key->get<std::string>())) return std::make_pair("cache:" + *id, std::string("prompt_cache_key"));
  }
  if (chat.user) {
    if (auto id = clean(*chat.user)) return std::make_pair("user:" + *id, std::string("user"));
  }
  return std::nullopt;
}

ApiError context_error(const std::string& message) {
  return {.status = 400, .type = "invalid_request_error", .message = message, .code = "context_length_exceeded"};
}

json compaction_event(const CompactionResult& r, const std::string& trigger, double ms, const json& summary_stats) {
  json ev = {{"ts", std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::system_clock::now().time_since_epoch()).count()},
             {"level", r.level},
             {"trigger", trigger},
             {"tokens_before", r.tokens_before},
             {"tokens_after", r.tokens_after},
             {"duration_ms", ms},
             {"dropped_messages", r.dropped_messages},
             {"truncated_messages", r.truncated_messages}};
  if (!r.summary_source.empty()) ev["summary_source"] = r.summary_source;
  if (!r.summary_error.empty()) ev["summary_error"] = r.summary_error;
  if (!summary_stats.empty()) ev["summary_request"] = summary_stats;
  return ev;
}

}  // namespace

void Gateway::chat(const HttpRequest& request, ResponseWriter& writer) {
  const auto t0 = Clock::now();
  RequestRecord rec{.route = "chat"};
  ChatRequest req;
  // History the engine would reject (broken tool-call arguments, null fields, orphan tool
  // results, ...) is repaired before anything looks at it, the same way every turn, so the
  // conversation hashes and renders identically from turn to turn.
  json raw_body;
  std::vector<HistoryRepair> repairs;
  if (auto e = parse_json_body(request.body, raw_body); e || (e = check_chat_limits(raw_body, request_limits()))) {
    rec.status = e->status;
    rec.error_kind = "bad_request";
    metrics_.record(rec);
    return send_error(writer, *e);
  }
  if (raw_body.is_object() && raw_body.contains("messages") && raw_body["messages"].is_array()) {
    const bool had_tools = raw_body.contains("tools");
    auto rh = repair_history(std::move(raw_body["messages"]), had_tools ? std::move(raw_body["tools"]) : json());
    raw_body["messages"] = std::move(rh.messages);
    if (had_tools) raw_body["tools"] = std::move(rh.tools);
    repairs = std::move(rh.repairs);
  }
  if (auto e = make_chat_request(std::move(raw_body), req)) {
    rec.status = e->status;
    rec.error_kind = "bad_request";
    metrics_.record(rec);
    return send_error(writer, *e);
  }
  for (const auto& r : repairs) {
    metrics_.add(fmt::format("history_repairs_total{{kind=\"{}\"}}", repair_kind_name(r.kind)));
    util::log_event(util::LogLevel::kInfo, "history_repair",
                    {{"kind", std::string(repair_kind_name(r.kind))}, {"path", r.path}, {"detail", r.detail}});
  }
  rec.stream = req.stream;
  json& body = req.body;

  // 1. Stable client messages: thinking policy, no historical reasoning, tool results in
  //    call order. These apply to the whole history the same way every turn.
  const bool thinking = apply_thinking_policy(body, options_.thinking);
  const size_t stripped = strip_history_reasoning(body["messages"]);
  const size_t reordered = options_.stabiliser.reorder_tool_results ? reorder_tool_results(body["messages"]) : 0;
  if (reordered > 0) metrics_.add("stabiliser_hits_total{rule=\"tool_reorder\"}", static_cast<double>(reordered));
  const json& messages = body["messages"];

  // 2. Which conversation is this? Only the caller's own (its API key's scope) are candidates.
  const std::string scope = caller_scope(request).value_or(Session::kOpenScope);
  const RequestKeys keys = RequestKeys::of(messages);
  auto explicit_id = explicit_session(request, req);
  auto match = explicit_id ? sessions_.find_or_create(scope, keys, explicit_id->first, explicit_id->second)
                           : sessions_.find_or_create(scope, keys, std::nullopt);
  auto session = match.session;
  // A place with the engine: one request per conversation, conversations taking turns,
  // bounded waiting (admission.h).
  Admission::Ticket ticket;
  if (auto e = admit(session->id, writer, ticket, rec)) {
    metrics_.record(rec);
    if (match.created) sessions_.discard_if_empty(session, 2);  // `session` and `match.session`
    if (e->status != 499) send_error(writer, *e);
    return;
  }
  std::unique_lock turn(session->turn);  // one request at a time per conversation

  // 3. Bring the request into the session's conversation: what of the stored state this
  //    request may use (intake.h; the isolation invariant).
  uint64_t stored_request_messages = 0;
  {
    std::lock_guard lock(session->mu);
    stored_request_messages = session->last_request_messages;
  }
  Intake intake = take_in(session->conversation,
                          {.messages = messages,
                           .keys = keys,
                           .named = session->explicit_id,
                           .window = match.how == "window",
                           .stored_request_messages = stored_request_messages},
                          options_.stabiliser);
  Conversation conv = std::move(intake.conversation);
  std::optional<BreakCause> cause = intake.cause;
  std::string cause_detail = intake.cause_detail;
  const uint64_t first_new = intake.first_new;
  if (intake.window_continued) metrics_.add("stabiliser_hits_total{rule=\"client_truncation\"}");
  if (!intake.volatile_now.empty()) metrics_.add("stabiliser_hits_total{rule=\"volatile_line\"}");
  if (intake.restarted) metrics_.add(fmt::format("conversations_rebuilt_total{{evidence=\"{}\"}}", evidence_name(intake.evidence)));

  // 4. Prepare the upstream request.
  const auto acquired = slots_.acquire(session->id);
  const int slot = acquired.first;  // a named copy: lambdas below capture it
  const bool reassigned = acquired.second;
  body["id_slot"] = slot;
  body["cache_prompt"] = true;
  // An explicit seed lets a rejected generation be replayed faithfully (rescue).
  if (!body.contains("seed") || !body["seed"].is_number_integer()) {
    static std::atomic<uint32_t> next_seed{0x6b76u};
    body["seed"] = next_seed.fetch_add(7919u) & 0x7fffffffu;
  }
  if (req.stream) {
    if (!body.contains("stream_options") || !body["stream_options"].is_object()) body["stream_options"] = json::object();
    body["stream_options"]["include_usage"] = true;
    body["return_progress"] = true;
  }
  if (auto e = wait_for_engine(writer)) {
    rec.status = e->status;
    rec.error_kind = "engine_unavailable";
    metrics_.record(rec);
    if (match.created && session->conversation.length == 0) sessions_.discard_if_empty(session, 2);
    return send_error(writer, *e);
  }

  auto count_view = [&](const json& view) -> Result<uint64_t> {
    json b = body;
    b["messages"] = view;
    KV_ASSIGN_OR_RETURN(TokenCount c, tokens_.count(b));
    return c.tokens;
  };
  auto count_text = [&](const std::string& text) -> Result<uint64_t> { return tokens_.count_text(text); };
  json summary_stats = json::object();
  SummarizeFn summarize;
  if (options_.model_summaries) {
    summarize = [&](const Conversation& c, uint64_t until, uint64_t max_tokens) {
      return engine_summary(*session, body, slot, c, until, max_tokens, summary_stats);
    };
  }
  std::vector<json> events;
  auto run_compaction = [&](uint64_t target, const std::string& trigger) -> std::optional<ApiError> {
    const auto tc = Clock::now();
    summary_stats = json::object();
    auto r = compact(conv, target, first_new, count_view, count_text, summarize, options_.compaction_options);
    if (!r) return context_error(r.error().message());
    conv = std::move(r->conversation);
    const double ms = ms_since(tc);
    json ev = compaction_event(*r, trigger, ms, summary_stats);
    json logged = ev;
    logged["session"] = session->id;
    util::log_event(util::LogLevel::kInfo, "compaction", std::move(logged));
    metrics_.add(fmt::format("compactions_total{{level=\"{}\",trigger=\"{}\"}}", r->level, trigger));
    events.push_back(std::move(ev));
    cause = BreakCause::kCompaction;
    cause_detail = r->level;
    return std::nullopt;
  };

  // 5. Accounting and proactive compaction. The exact count (the engine's template and
  //    tokenizer, incrementally) is only needed near the watermark: when the view extends
  //    the previous one, an upper bound — the engine's own count of the previous prompt, its
  //    reply, and every byte of what was added (a token is at least one byte) — decides
  //    whether it is.
  json view = build_view(conv);
  // A slot that does not hold this conversation (given to it anew, or the engine restarted):
  // its saved state, when it matches, is restored before anything is sent (kv_keeper.h).
  const uint64_t generation = engine_generation_.load();
  const KvKeeper::Prepared kv = kv_ ? kv_->prepare(slot, session->id, generation, view, body) : KvKeeper::Prepared{};
  const uint64_t context = context_tokens();
  const uint64_t high = options_.high_watermark_tokens.value_or(
      static_cast<uint64_t>(static_cast<double>(context) * options_.high_watermark_fraction));
  const uint64_t low = static_cast<uint64_t>(static_cast<double>(high) * options_.low_watermark_fraction);
  const uint64_t reserve = req.max_tokens && *req.max_tokens > 0 ? static_cast<uint64_t>(*req.max_tokens)
                                                                  : options_.reply_reserve_tokens;
  std::optional<uint64_t> bound;
  if (!options_.always_count_tokens && session->last_sent_tokens > 0 && !session->last_view.empty() &&
      session->engine_generation == engine_generation_.load() &&
      first_different_message(session->last_view, view) == session->last_view.size()) {
    uint64_t added = 0;
    for (size_t i = session->last_view.size(); i < view.size(); ++i) {
      added += 16 + util::json_text(view[i]).size();
    }
    bound = session->last_sent_tokens + added + 64;
  }
  uint64_t counted_tokens = 0;
  std::string rendered;
  std::optional<ApiError> failure;
  const bool need_exact = options_.count_tokens && (!bound || (options_.compaction && high > 0 && *bound + reserve > high));
  if (need_exact) {
    const auto ta = Clock::now();
    json b = body;
    b["messages"] = view;
    auto count = tokens_.count(b);
    rec.accounting_ms = ms_since(ta);
    if (count.ok()) {
      counted_tokens = count->tokens;
      rendered = std::move(count->prompt);
    } else {
      util::log_event(util::LogLevel::kWarn, "token_accounting_failed",
                      {{"session", session->id}, {"error", count.error().message()}});
      if (is_count_time_limit(count.error())) failure = request_too_large(count.error().message());
    }
  }
  if (!failure && options_.compaction && high > 0 && counted_tokens > 0 && counted_tokens + reserve > high) {
    failure = run_compaction(low > reserve ? low - reserve : low, "watermark");
    if (!failure) {
      view = build_view(conv);
      auto n = count_view(view);
      counted_tokens = n.ok() ? *n : counted_tokens;
    }
  }

  // 6. Send (and on overflow compact harder and retry).
  CancelScope cancel;
  std::unique_ptr<StreamRelay> relay;
  if (req.stream && !failure) {
    relay = std::make_unique<StreamRelay>(writer, cancel, options_.stream_head_grace, options_.keepalive);
  }
  SendOutcome out;
  int overflow_retries = 0;
  int engine_retries = 0;
  bool template_retried = false;
  bool filled_retried = false;
  // A reply may use the rest of the slot's context and no more. An engine that fails a reply
  // that fills it (ik: an error after the whole generation) is given that room as max_tokens
  // once the prompt is counted exactly, so the reply ends as "length" instead.
  auto cap_reply = [&](uint64_t prompt) {
    if (context == 0 || prompt == 0 || prompt + 1 >= context) return false;
    const uint64_t room = context - prompt - 1;  // the last cell stays free
    if (req.max_tokens && *req.max_tokens > 0 && static_cast<uint64_t>(*req.max_tokens) <= room) return false;
    body.erase("max_completion_tokens");
    body.erase("n_predict");
    body["max_tokens"] = room;
    return true;
  };
  if (plan::fails_when_reply_fills_context(options_.engine_fork) && counted_tokens > 0) cap_reply(counted_tokens);
  while (!failure) {
    body["messages"] = session->template_repairs ? strict_repair(view, body) : view;
    if (util::log_enabled(util::LogLevel::kDebug)) {
      util::log_event(util::LogLevel::kDebug, "upstream_request", {{"session", session->id}, {"body", body}});
    }
    const EngineEndpoint engine_before = upstream_->endpoint();
    out = send_chat(body, req.stream, req.include_usage, counted_tokens > 0 ? counted_tokens : bound.value_or(0),
                    static_cast<size_t>(conv.length), writer,
                    relay.get(), cancel, t0);
    if (out.upstream_failure && !out.relayed && !cancel.cancelled() && engine_retries < 1 &&
        (*out.upstream_failure == UpstreamFailure::kConnect || *out.upstream_failure == UpstreamFailure::kBroken ||
         *out.upstream_failure == UpstreamFailure::kUnavailable)) {
      // The engine failed before any of its answer reached the client (it was down, or died
      // during the prefill): send the request again once the engine is back.
      ++engine_retries;
      metrics_.add("engine_retries_total");
      if (wait_for_engine_again(engine_before, writer)) continue;
    }
    if (out.context_filled && !req.stream && !filled_retried && !cancel.cancelled()) {
      // Generated until the context was full and failed (nothing reached the client): again,
      // limited to the room the exactly counted prompt leaves.
      filled_retried = true;
      if (counted_tokens == 0) {
        auto n = count_view(view);
        counted_tokens = n.ok() ? *n : 0;
      }
      if (cap_reply(counted_tokens)) {
        metrics_.add("context_filled_retries_total");
        continue;
      }
    }
    if (out.template_error && !template_retried && !session->template_repairs) {
      // The model's template refuses this history (a late system message, an empty
      // assistant turn, ...): repair more strictly, and keep doing so for this session.
      template_retried = true;
      session->template_repairs = true;
      metrics_.add("history_repairs_total{kind=\"template_retry\"}");
      continue;
    }
    if (!out.overflow || !options_.compaction || overflow_retries >= options_.max_overflow_retries) break;
    ++overflow_retries;
    metrics_.add("overflow_retries_total");
    // The engine counted more than we planned for (or its context is smaller): aim lower.
    uint64_t basis = std::max(counted_tokens, out.overflow_prompt_tokens);
    uint64_t target = basis * 6 / 10;
    if (out.overflow_context > 0) {
      const uint64_t engine_low = static_cast<uint64_t>(static_cast<double>(out.overflow_context) *
                                                        options_.high_watermark_fraction * options_.low_watermark_fraction);
      target = std::min(target, engine_low > reserve ? engine_low - reserve : engine_low);
    }
    failure = run_compaction(target, "overflow");
    if (failure) break;
    view = build_view(conv);
    auto n = count_view(view);
    counted_tokens = n.ok() ? *n : counted_tokens;
  }
  if (!failure && out.failure) {
    failure = out.failure;
    if (out.overflow) {
      // ik's refusal carries no figures: the context is then the one kvgate planned or asked for.
      const uint64_t n_ctx = out.overflow_context > 0 ? out.overflow_context : context;
      const std::string size = counted_tokens > 0 ? fmt::format(" ({} tokens)", counted_tokens) : std::string();
      const std::string tried = options_.compaction
                                    ? fmt::format("even after {} compactions", overflow_retries)
                                    : std::string("and compaction is off (--compaction off)");
      failure = context_error(fmt::format("the conversation{} does not fit the engine's context of {} tokens {}: {}",
                                          size, n_ctx, tried, out.failure->message));
    }
  }
  if (failure && !cancel.cancelled()) {
    if (relay && relay->started()) {
      relay->write("data: " + failure->to_json().dump() + "\n\n");
    } else {
      if (relay) relay->finish();
      send_error(writer, *failure);
    }
  }

  // 7. Account; save the session before the client sees the end of the answer.
  const Usage& u = out.reply.usage();
  const bool ok = !failure && !out.saw_error_event;
  rec.status = failure ? failure->status : (out.saw_error_event ? 500 : 200);
  if (failure) rec.error_kind = cancel.cancelled() ? "client_disconnect" : failure->code.value_or("upstream");
  if (!failure && out.saw_error_event) rec.error_kind = "engine_stream_error";
  rec.prompt_tokens = u.prompt_tokens;
  rec.cached_tokens = u.cached_tokens;
  rec.prefilled_tokens = u.prefilled_tokens;
  rec.completion_tokens = u.completion_tokens;
  rec.ttft_ms = out.ttft_ms;
  rec.decode_tokens_per_s = u.predicted_per_second;
  rec.total_ms = ms_since(t0);
  int64_t accounting_diff = 0;
  if (u.known) {
    learn_prefill_speed(u.prompt_per_token_ms, u.prefilled_tokens);
    if (counted_tokens > 0 && u.prompt_tokens > 0) accounting_diff = tokens_.calibrate(counted_tokens, u.prompt_tokens);
  }
  // Where did the prompt stop matching the previous one, and why?
  size_t diverged_at = 0;
  if (!session->last_view.empty()) {
    diverged_at = first_different_message(session->last_view, view);
    const bool prefix_kept = diverged_at >= session->last_view.size();
    if (prefix_kept && !cause && u.known && session->last_sent_tokens > 64 &&
        u.cached_tokens * 10 < session->last_sent_tokens * 9) {
      cause = session->engine_generation != engine_generation_.load() ? BreakCause::kEngineRestart
                                                                       : BreakCause::kSlotEviction;
      cause_detail = fmt::format("engine reused {} of the previous {} prompt tokens", u.cached_tokens,
                                 session->last_sent_tokens);
    }
  }
  if (cause) {
    metrics_.add(fmt::format("prefix_breaks_total{{cause=\"{}\"}}", cause_name(*cause)));
    util::log_event(util::LogLevel::kInfo, "prefix_break",
                    {{"session", session->id},
                     {"cause", cause_name(*cause)},
                     {"detail", cause_detail},
                     {"message", diverged_at},
                     {"byte", rendered.empty() || session->last_prompt.empty()
                                  ? json(nullptr)
                                  : json(first_different_byte(session->last_prompt, rendered))}});
  }
  rec.session = session->id;
  rec.scope = scope;
  if (u.prompt_per_token_ms > 0 && u.prefilled_tokens > 0) rec.prefill_tokens_per_s = 1000.0 / u.prompt_per_token_ms;
  record_turn(*session, {.view = view, .diverged_at = diverged_at, .rendered = rendered, .cause = cause, .cause_detail = cause_detail,
                         .record = rec, .messages = messages.size(), .slot = slot, .recognised_by = match.how,
                         .compactions = events});
  metrics_.record(rec);
  if (ok) engine_answered();
  if (ok) {
    const uint64_t request_messages = conv.length;
    conv.append_reply(out.reply.message());
    session->conversation = std::move(conv);
    session->last_view = view;
    session->last_prompt = std::move(rendered);
    session->last_sent_tokens = u.prompt_tokens;
    session->engine_generation = engine_generation_.load();
    {
      std::lock_guard lock(session->mu);
      session->chain = session->conversation.chain;
      session->last_request_messages = request_messages;
    }
    sessions_.set_keys(session, recognition_keys(scope, session->explicit_id, session->conversation, request_messages));
  } else if (match.created && session->conversation.length == 0) {
    sessions_.discard_if_empty(session, 2);  // nothing to keep: the client's retry starts afresh
  }  // A failed turn leaves the session as it was; the client will send it again.
  {
    std::lock_guard lock(session->mu);
    auto& c = session->counters;
    ++c.requests;
    if (!ok) ++c.errors;
    c.prompt_tokens += u.prompt_tokens;
    c.cached_tokens += u.cached_tokens;
    c.prefilled_tokens += u.prefilled_tokens;
    c.completion_tokens += u.completion_tokens;
    if (out.ttft_ms >= 0) c.ttft_ms_total += out.ttft_ms;
    session->slot = slot;
    if (u.known) {
      session->last_prompt_tokens = u.prompt_tokens;
      session->last_cached_tokens = u.cached_tokens;
    }
    const Conversation& cv = session->conversation;
    session->view_stats = {cv.length, cv.cut, cv.kept.size(), cv.summary ? cv.summary->tokens : 0, cv.generation,
                           cv.truncations.size(), cv.summary ? cv.summary->source : ""};
    if (ok) {
      for (const auto& ev : events) session->compactions.push_back(ev);
    }
    while (session->compactions.size() > 50) session->compactions.pop_front();
  }
  if (ok) (void)persist(*session, events);

  if (out.final_body && ok) writer.send(200, kJson, *out.final_body);
  if (relay) {
    if (out.saw_done) relay->write("data: [DONE]\n\n");
    relay->finish();
  }
  if (ok && kv_) {
    const json next_view = build_view(session->conversation);  // ends with the reply as it is sent next time
    kv_->after_turn(slot, session->id, generation, view, body, next_view.empty() ? json::object() : next_view.back(),
                    {.prompt_tokens = u.prompt_tokens,
                     .cached_tokens = u.cached_tokens,
                     .completion_tokens = u.completion_tokens,
                     .prefill_ms_per_token = prefill_ms_per_token_.load()});
  }
  util::log_event(ok ? util::LogLevel::kInfo : util::LogLevel::kWarn, "request",
                  {{"route", "chat"},
                   {"session", session->id},
                   {"recognised_by", match.how},
                   {"evidence", evidence_name(intake.evidence)},
                   {"rebuilt", intake.restarted},
                   {"loaded", match.loaded},
                   {"messages", messages.size()},
                   {"view_messages", view.size()},
                   {"slot", slot},
                   {"slot_reassigned", reassigned},
                   {"kv_restored_tokens", kv.tokens},
                   {"stream", req.stream},
                   {"thinking", thinking},
                   {"reasoning_stripped", stripped},
                   {"status", rec.status},
                   {"error", failure ? json(failure->message)
                                     : out.saw_error_event && out.reply.error() ? *out.reply.error() : json(nullptr)},
                   {"prompt_tokens", u.prompt_tokens},
                   {"counted_tokens", counted_tokens},
                   {"bound_tokens", bound ? json(*bound) : json(nullptr)},
                   {"accounting_diff", accounting_diff},
                   {"accounting_ms", rec.accounting_ms},
                   {"cached_tokens", u.cached_tokens},
                   {"prefilled_tokens", u.prefilled_tokens},
                   {"completion_tokens", u.completion_tokens},
                   {"compactions", events.size()},
                   {"history_repairs", repairs.size()},
                   {"rescued", out.rescued},
                   {"overflow_retries", overflow_retries},
                   {"engine_retries", engine_retries},
                   {"queued_ms", ticket.waited().count()},
                   {"ttft_ms", out.ttft_ms},
                   {"total_ms", rec.total_ms}});
}

}  // namespace kvgate::gateway
