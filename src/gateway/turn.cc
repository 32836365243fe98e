// A chat turn's order (Turn::run) and its steps up to the engine: prepare, recognise,
// reconcile, bind, restore.
#include <fmt/format.h>
#include <xxhash.h>

#include "gateway/gateway.h"
#include "upstream/model_id.h"
#include "upstream/rescue_replay.h"
#include "gateway/turn_steps.h"
#include "session/normalize.h"
#include "util/json.h"
#include "util/log.h"

namespace kvgate::gateway {

using rescue::repair_kind_name;
using session::evidence_name;
using session::RequestKeys;
using session::take_in;

using nlohmann::json;

TurnServices Gateway::turn_services() {
  return {.options = options_,
          .engine = engine_,
          .sessions = sessions_,
          .slots = slots_,
          .tokens = tokens_,
          .metrics = metrics_,
          .kv = kv_.get(),
          .host = *this};
}

void Gateway::run_turn(TurnInput input, TurnOutput& output) {
  Turn turn(turn_services(), std::move(input), output);
  turn.run();
}

Turn::Turn(const TurnServices& services, TurnInput input, TurnOutput& output)
    : s_(services), options_(services.options), in_(std::move(input)), out_(output) {
  rec_.route = in_.api;
}

Turn::~Turn() {
  if (stream_opened_ && !stream_ended_) out_.end_stream(false);
}

void Turn::run() {
  if (auto prepared = prepare(); !prepared.ok()) return refuse(prepared.error(), "bad_request");
  if (s_.engine.fatal().fatal(digest_)) return refuse(fatal_request_error(true), "request_stopped_engine");
  if (auto placed = recognise(); !placed.ok()) {
    if (!client_left(placed.error())) out_.fail(placed.error());
    return;
  }
  reconcile();
  if (auto bound = bind(); !bound.ok()) return out_.fail(bound.error());
  restore();
  ApiStatus result = budget();
  if (result.ok() && managed_.paused) {
    answer_compaction();
  } else if (result.ok()) {
    result = send();
  }
  commit(result);
}

void Turn::refuse(const ApiError& error, const char* kind) {
  rec_.status = error.status;
  rec_.error_kind = kind;
  s_.metrics.record(rec_);
  if (!client_left(error)) out_.fail(error);
}

ApiStatus Turn::prepare() {
  digest_ = FatalRequests::digest(util::json_text(in_.body));
  KV_ASSIGN_OR_RETURN(PreparedChat prepared, prepare_chat(std::move(in_.body), s_.host.request_limits()));
  req_ = std::move(prepared.request);
  repairs_ = std::move(prepared.repairs);
  for (const auto& r : repairs_) {
    s_.metrics.add(fmt::format("history_repairs_total{{kind=\"{}\"}}", repair_kind_name(r.kind)));
    util::log_event(util::LogLevel::kInfo, "history_repair",
                    {{"kind", std::string(repair_kind_name(r.kind))}, {"path", r.path}, {"detail", r.detail}});
  }
  rec_.stream = in_.stream;
  json& body = req_.body;
  if (req_.stream != in_.stream) body["stream"] = in_.stream;  // what the adapter asked for
  // Stable client messages: these apply to the whole history the same way every turn.
  stable_ = stabilise(body, options_.thinking, options_.stabiliser);
  if (stable_.reordered > 0) {
    s_.metrics.add("stabiliser_hits_total{rule=\"tool_reorder\"}", static_cast<double>(stable_.reordered));
  }
  req_.tools_text = tools_as_written(in_.tools_text, body);
  request_messages_ = body["messages"].size();
  return {};
}

ApiStatus Turn::recognise() {
  // Which conversation is this? Only the caller's own (its API key's scope) are candidates.
  keys_ = RequestKeys::of(req_.body["messages"], session::tools_hash(req_.body));
  match_ = in_.name ? s_.sessions.find_or_create(in_.scope, keys_, in_.name->id, in_.name->how)
                    : s_.sessions.find_or_create(in_.scope, keys_, std::nullopt);
  session_ = match_.session;
  // A place with the engine: one request per conversation, conversations taking turns,
  // bounded waiting (admission.h).
  auto ticket = s_.host.admit(session_->id, [this] { return out_.client_gone(); }, rec_);
  if (!ticket.ok()) {
    s_.metrics.record(rec_);
    if (match_.created) s_.sessions.discard_if_empty(session_, 2);  // `session_` and `match_.session`
    return std::move(ticket).error();
  }
  ticket_ = std::move(ticket).value();
  turn_lock_ = std::unique_lock(session_->turn);  // one request at a time per conversation
  return {};
}

void Turn::restore() {
  s_.host.mark_template_kwargs(req_.body);
  view_ = s_.host.upstream_view(build_view(conv_), req_.body);
  // A slot that does not hold this conversation (given to it anew, or the engine restarted):
  // its saved state, when it matches, is restored before anything is sent (kvstate/kv_keeper.h).
  generation_ = s_.engine.generation();
  if (s_.kv) kv_ = s_.kv->prepare(slot_, session_->id, generation_, view_, req_.body, session_->scope);
  // With several keys, nothing another key left in the slot may be reused (kvstate/slot_tenants.h):
  // the slot holds this key's own restored state, or is cleared.
  if (!s_.host.keep_slot_private(slot_, session_->scope, kv_.confirmed)) req_.body["cache_prompt"] = false;
}

void Turn::reconcile() {
  // What of the stored state this request may use (intake.h; the isolation invariant).
  uint64_t stored_request_messages = 0;
  {
    std::lock_guard lock(session_->mu);
    stored_request_messages = session_->last_request_messages;
  }
  json& messages = req_.body["messages"];
  intake_ = take_in(session_->conversation,
                    {.messages = messages,
                     .keys = keys_,
                     .named = session_->explicit_id,
                     .window = match_.how == "window",
                     .stored_request_messages = stored_request_messages},
                    options_.stabiliser);
  conv_ = std::move(intake_.conversation);
  cause_ = intake_.cause;
  cause_detail_ = intake_.cause_detail;
  if (intake_.window_continued) s_.metrics.add("stabiliser_hits_total{rule=\"client_truncation\"}");
  if (intake_.window_kept) s_.metrics.add("stabiliser_hits_total{rule=\"client_window\"}");
  if (!intake_.volatile_now.empty()) s_.metrics.add("stabiliser_hits_total{rule=\"volatile_line\"}");
  if (intake_.restarted) {
    s_.metrics.add(fmt::format("conversations_rebuilt_total{{evidence=\"{}\"}}", evidence_name(intake_.evidence)));
  }
  // From here on the upstream messages are the view: the request's own are in the conversation.
  req_.body.erase("messages");
}

ApiStatus Turn::bind() {
  const auto acquired = s_.slots.acquire(session_->id);
  slot_ = acquired.first;
  reassigned_ = acquired.second;
  json& body = req_.body;
  // What the engine side sees of the conversation: a stable hash of its session, which says
  // nothing of the client's id or key and is safe in a header.
  tag_.emplace(fmt::format("kvg-{:016x}", XXH3_64bits(session_->id.data(), session_->id.size())));
  if (!options_.conversation_field.empty()) body[options_.conversation_field] = *ConversationTag::current();
  body["id_slot"] = slot_;
  body["cache_prompt"] = true;
  // A generation nobody capped (Codex sets no limit) ends as "length" at the default cap
  // instead of decoding until the context is full.
  if (!req_.max_tokens && options_.default_max_tokens > 0) body["max_tokens"] = options_.default_max_tokens;
  if (!body.contains("seed") || !body["seed"].is_number_integer()) body["seed"] = replay_seed();
  if (in_.stream) {
    if (!body.contains("stream_options") || !body["stream_options"].is_object()) body["stream_options"] = json::object();
    body["stream_options"]["include_usage"] = true;
    body["return_progress"] = true;
  }
  auto ready = s_.engine.wait_for_engine([this] { return out_.client_gone(); });
  if (!ready.ok()) {
    rec_.status = ready.error().status;
    rec_.error_kind = "engine_unavailable";
    s_.metrics.record(rec_);
    if (match_.created && session_->conversation.length == 0) s_.sessions.discard_if_empty(session_, 2);
  }
  return ready;
}

std::string Turn::model_name() const {
  return answer_model_for(req_.body, options_.model_name);
}

}  // namespace kvgate::gateway
