// Gateway: durable sessions, the engine's context size, engine-written summaries and
// manual compaction.
#include <fmt/format.h>

#include "gateway/chat_request.h"
#include "gateway/gateway.h"
#include "util/log.h"
#include "util/json.h"

namespace kvgate::gateway {

using session::StoredSession;
using session::SummarizeFn;
using session::build_view;
using session::compact;
using session::message_text;
using session::recognition_keys;

using nlohmann::json;

namespace {

json counters_json(const Session& s) {
  const auto& c = s.counters;
  return {{"requests", c.requests},           {"errors", c.errors},
          {"prompt_tokens", c.prompt_tokens}, {"cached_tokens", c.cached_tokens},
          {"prefilled_tokens", c.prefilled_tokens}, {"completion_tokens", c.completion_tokens},
          {"ttft_ms_total", c.ttft_ms_total}, {"last_request_messages", s.last_request_messages},
          {"last_prompt_tokens", s.last_prompt_tokens}, {"last_cached_tokens", s.last_cached_tokens},
          {"scope", s.scope}, {"named_by_client", s.explicit_id}};
}

int64_t unix_seconds(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

}  // namespace

Status Gateway::open_store(const std::filesystem::path& path) {
  KV_ASSIGN_OR_RETURN(store_, SessionStore::open(path));
  SessionStore* store = store_.get();
  // A lookup that fails (the store is locked by another process, or unreadable) pauses
  // lookups for a moment: a request's recognition tries up to ~20 keys, and each must not
  // wait for the lock again. Meanwhile only sessions in memory are recognised.
  sessions_.set_loader({
      .find = [this, store](uint64_t key) -> std::optional<std::string> {
        const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::steady_clock::now().time_since_epoch())
                                .count();
        if (now < store_reads_paused_until_ms_.load()) return std::nullopt;
        auto r = store->find_by_key(key);
        if (!r.ok()) {
          store_reads_paused_until_ms_ = now + 2000;
          metrics_.add("session_store_errors_total{op=\"find\"}");
          util::log_event(util::LogLevel::kError, "session_store_error", {{"error", r.error().message()}});
          return std::nullopt;
        }
        return *r;
      },
      .load = [this](const std::string& id) { return load_session(id); },
  });
  return {};
}

std::shared_ptr<Session> Gateway::load_session(const std::string& id) {
  if (!store_) return nullptr;
  auto loaded = store_->load(id);
  if (!loaded.ok()) {
    util::log_event(util::LogLevel::kError, "session_store_error", {{"session", id}, {"error", loaded.error().message()}});
    return nullptr;
  }
  if (!loaded->has_value()) return nullptr;
  const StoredSession& st = **loaded;
  auto conv = Conversation::from_json(st.state);
  if (!conv) {
    util::log_event(util::LogLevel::kError, "session_store_error",
                    {{"session", id}, {"error", "stored conversation is unreadable; starting the session afresh"}});
    return nullptr;
  }
  const json& c = st.counters;
  // A session saved before sessions had scopes belongs to none: no caller reaches it.
  auto s = std::make_shared<Session>(id, c.value("scope", std::string()), c.value("named_by_client", false));
  s->conversation = std::move(*conv);
  s->chain = s->conversation.chain;
  s->slot = st.slot;
  s->created = std::chrono::system_clock::time_point(std::chrono::seconds(st.created));
  s->last_used = std::chrono::system_clock::time_point(std::chrono::seconds(st.last_used));
  s->counters.requests = c.value("requests", uint64_t{0});
  s->counters.errors = c.value("errors", uint64_t{0});
  s->counters.prompt_tokens = c.value("prompt_tokens", uint64_t{0});
  s->counters.cached_tokens = c.value("cached_tokens", uint64_t{0});
  s->counters.prefilled_tokens = c.value("prefilled_tokens", uint64_t{0});
  s->counters.completion_tokens = c.value("completion_tokens", uint64_t{0});
  s->counters.ttft_ms_total = c.value("ttft_ms_total", 0.0);
  s->last_request_messages = c.value("last_request_messages", size_t{0});
  s->last_prompt_tokens = c.value("last_prompt_tokens", uint64_t{0});
  s->last_cached_tokens = c.value("last_cached_tokens", uint64_t{0});
  const Conversation& cv = s->conversation;
  s->view_stats = {cv.length, cv.cut, cv.kept.size(), cv.summary ? cv.summary->tokens : 0, cv.generation,
                   cv.truncations.size(), cv.summary ? cv.summary->source : ""};
  if (auto history = store_->compactions(id, 50); history.ok()) {
    for (auto& ev : *history) s->compactions.push_back(std::move(ev));
  }
  metrics_.add("sessions_loaded_total");
  return s;
}

Status Gateway::persist(Session& session, const std::vector<json>& new_compactions) {
  if (!store_) return {};
  Status saved = save_session(session, new_compactions);
  if (saved.ok()) save_unsaved_sessions(session.id);
  return saved;
}

void Gateway::save_unsaved_sessions(const std::string& just_saved) {
  std::vector<std::string> ids;
  {
    std::lock_guard lock(unsaved_mu_);
    ids.assign(unsaved_.begin(), unsaved_.end());
  }
  for (const auto& id : ids) {
    if (id == just_saved) continue;
    auto s = sessions_.in_memory(id);
    if (!s) continue;
    // A session whose request is running saves itself when that request ends.
    std::unique_lock turn(s->turn, std::try_to_lock);
    if (!turn.owns_lock()) continue;
    if (!save_session(*s, {}).ok()) return;  // still failing: leave the rest for later
  }
}

Status Gateway::save_session(Session& session, const std::vector<json>& new_compactions) {
  StoredSession st;
  st.id = session.id;
  st.state = session.conversation.to_json();
  std::vector<uint64_t> keys;
  {
    std::lock_guard lock(session.mu);
    st.counters = counters_json(session);
    st.slot = session.slot;
    st.created = unix_seconds(session.created);
    st.last_used = unix_seconds(session.last_used);
    keys = recognition_keys(session);
  }
  auto saved = store_->save(st, keys, new_compactions);
  // The session stays served from memory either way; a later save writes its whole state
  // (its own next turn, or the first save that works again).
  store_failing_ = !saved.ok();
  {
    std::lock_guard lock(unsaved_mu_);
    if (saved.ok()) {
      unsaved_.erase(session.id);
    } else {
      unsaved_.insert(session.id);
    }
  }
  if (!saved.ok()) {
    metrics_.add("session_store_errors_total{op=\"save\"}");
    util::log_event(util::LogLevel::kError, "session_store_error",
                    {{"session", session.id}, {"error", saved.error().message()}});
  }
  return saved;
}

uint64_t Gateway::context_tokens() {
  if (options_.context_tokens) return *options_.context_tokens;
  std::lock_guard lock(context_mu_);
  if (context_generation_ == engine_generation_.load() && context_tokens_ > 0) return context_tokens_;
  auto res = upstream_->call("GET", "/props", "", std::chrono::seconds(10));
  if (auto* r = std::get_if<UpstreamResponse>(&res); r && r->status == 200) {
    auto j = json::parse(r->body, nullptr, false);
    uint64_t n = 0;
    if (!j.is_discarded() && j.is_object()) {
      // Mainline: default_generation_settings.n_ctx is per slot; ik: n_ctx / total_slots.
      if (j.contains("default_generation_settings") && j["default_generation_settings"].is_object()) {
        n = j["default_generation_settings"].value("n_ctx", uint64_t{0});
      }
      if (n == 0 && j.contains("n_ctx") && j["n_ctx"].is_number_unsigned()) {
        const uint64_t slots = std::max<uint64_t>(1, j.value("total_slots", uint64_t{1}));
        n = j["n_ctx"].get<uint64_t>() / slots;
      }
    }
    if (n > 0) {
      context_tokens_ = n;
      context_generation_ = engine_generation_.load();
    }
  }
  return context_tokens_;
}

Result<std::string> Gateway::engine_summary(Session& session, const json& request_body, int slot,
                                            const Conversation& c, uint64_t until, uint64_t max_tokens,
                                            json& stats) {
  // The engine has the last view (and its reply) in this slot's cache: ask for the summary
  // as a continuation of exactly that, so only the instruction and the summary are computed.
  json messages = session.last_view.empty() ? build_view(c) : session.last_view;
  if (!session.last_view.empty() && c.length > session.last_request_messages &&
      session.last_request_messages >= c.first_kept()) {
    messages.push_back(c.at(session.last_request_messages).message);  // the reply the engine wrote
  }
  std::string before;
  if (until < c.length) {
    std::string t = message_text(c.at(until).message);
    before = t.substr(0, std::min<size_t>(t.size(), 80));
  }
  const uint64_t words = std::max<uint64_t>(40, max_tokens * 6 / 10);
  std::string instruction = fmt::format(
      "Write a summary of the conversation above{} so that it can be continued without it: the task and its goal, "
      "decisions taken, files, commands, numbers and errors that matter, and what is still open. If a summary of "
      "earlier parts is above, fold it in. At most {} words, plain text, no preamble.",
      before.empty() ? std::string() : fmt::format(" before the message that begins \"{}\"", before), words);
  messages.push_back({{"role", "user"}, {"content", instruction}});
  json render = {{"messages", messages}, {"chat_template_kwargs", {{"enable_thinking", false}}}};
  if (request_body.contains("tools")) render["tools"] = request_body["tools"];
  auto rendered = upstream_->call("POST", "/apply-template", util::json_text(render),
                                  std::chrono::seconds(60));
  if (auto* err = std::get_if<UpstreamError>(&rendered)) return Error("summary: " + err->message);
  auto& rr = std::get<UpstreamResponse>(rendered);
  auto rj = json::parse(rr.body, nullptr, false);
  if (rr.status != 200 || rj.is_discarded() || !rj.contains("prompt")) {
    return Error(fmt::format("summary: the engine could not render the request ({})", rr.status));
  }
  // Streamed: a model can emit bytes that are not valid UTF-8, which makes the engine reject
  // a non-streamed answer as a whole; the stream delivers every piece.
  json completion = {{"prompt", rj["prompt"]},
                     {"n_predict", max_tokens},
                     {"id_slot", slot},
                     {"cache_prompt", true},
                     {"temperature", 0.3},
                     {"return_progress", true},
                     {"stream", true}};
  // The client's own token constraints apply to the summary too.
  if (request_body.contains("logit_bias")) completion["logit_bias"] = request_body["logit_bias"];
  const auto t0 = std::chrono::steady_clock::now();
  std::string text;
  json last;
  json progress;
  std::string stream_error;
  const EventStreamEnd stream = stream_events(
      *upstream_, "/completion", util::json_text(completion),
      [&](const std::string& data) {
        auto j = json::parse(data, nullptr, false);
        if (j.is_discarded() || !j.is_object()) return;
        if (j.contains("content") && j["content"].is_string()) text += j["content"].get<std::string>();
        if (j.contains("prompt_progress") && j["prompt_progress"].is_object()) progress = j["prompt_progress"];
        if (j.contains("error") && j["error"].is_object()) stream_error = j["error"].value("message", "error");
        if (j.value("stop", false)) last = j;
      },
      std::chrono::duration_cast<std::chrono::milliseconds>(options_.summary_timeout));
  if (stream.failure) return Error("summary: " + stream.failure->message);
  if (stream.status != 200) {
    return Error(fmt::format("summary: the engine answered {}: {}", stream.status, stream.error_body.substr(0, 300)));
  }
  // How much of the summary prompt the engine had cached: from its prefill progress (the
  // final timings are missing when the engine rejected the end of the output).
  if (progress.is_object()) {
    stats = {{"prompt_tokens", progress.value("total", 0)}, {"cached_tokens", progress.value("cache", 0)}};
  }
  if (!stream_error.empty()) {
    stats["engine_error"] = stream_error;
    if (text.empty()) return Error("summary: " + stream_error);
  }
  if (auto end = text.find("</think>"); end != std::string::npos) text = text.substr(end + 8);
  while (!text.empty() && (text.front() == '\n' || text.front() == ' ')) text.erase(0, 1);
  if (const CompletionFigures f = completion_figures(last); f.known) {
    stats["prompt_tokens"] = f.prompt_tokens;
    stats["cached_tokens"] = f.cached_tokens;
    stats["generated_tokens"] = f.generated_tokens;
  }
  stats["ms"] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return text;
}

void Gateway::compact_session(const HttpRequest& request, ResponseWriter& writer) {
  // POST /kvgate/v1/sessions/ID/compact  {"target_tokens": N}   (default: the low watermark)
  const std::string prefix = "/kvgate/v1/sessions/";
  const std::string suffix = "/compact";
  if (request.path.size() <= prefix.size() + suffix.size() ||
      request.path.compare(request.path.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return send_error(writer, not_found(fmt::format("no route for POST {}", request.path)));
  }
  const std::string id = request.path.substr(prefix.size(), request.path.size() - prefix.size() - suffix.size());
  auto session = sessions_.get(id, caller_scope(request).value_or(""));
  if (!session) return send_error(writer, not_found(fmt::format("no session '{}'", id)));
  json args = json::object();
  if (!request.body.empty()) {
    if (auto e = parse_json_body(request.body, args)) return send_error(writer, *e);
    if (!args.is_object()) return send_error(writer, bad_request("request body must be a JSON object"));
  }
  RequestRecord rec{.route = "compact"};
  Admission::Ticket ticket;  // the engine writes the summary: a place like any request's
  if (auto e = admit(session->id, writer, ticket, rec)) {
    if (e->status != 499) send_error(writer, *e);
    return;
  }
  std::unique_lock turn(session->turn);
  Conversation& conv = session->conversation;
  if (conv.length == 0) return send_error(writer, bad_request("the session has no conversation yet"));
  const uint64_t context = context_tokens();
  const uint64_t high = options_.high_watermark_tokens.value_or(
      static_cast<uint64_t>(static_cast<double>(context) * options_.high_watermark_fraction));
  uint64_t target = static_cast<uint64_t>(static_cast<double>(high) * options_.low_watermark_fraction);
  if (args.contains("target_tokens")) {
    if (!args["target_tokens"].is_number_unsigned()) {
      return send_error(writer, bad_request("target_tokens must be a positive integer", "target_tokens"));
    }
    target = args["target_tokens"];
  }
  json body = {{"chat_template_kwargs", {{"enable_thinking", false}}}};
  auto count_view = [&](const json& view) -> Result<uint64_t> {
    json b = body;
    b["messages"] = view;
    KV_ASSIGN_OR_RETURN(TokenCount c, tokens_.count(b));
    return c.tokens;
  };
  auto count_text = [&](const std::string& text) -> Result<uint64_t> { return tokens_.count_text(text); };
  json stats = json::object();
  SummarizeFn summarize;
  if (options_.model_summaries) {
    summarize = [&](const Conversation& c, uint64_t until, uint64_t max_tokens) {
      return engine_summary(*session, body, session->slot < 0 ? 0 : session->slot, c, until, max_tokens, stats);
    };
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto r = compact(conv, target, conv.length, count_view, count_text, summarize, options_.compaction_options);
  if (!r) return send_error(writer, context_error_message(r.error().message()));
  json ev = {{"ts", std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::system_clock::now().time_since_epoch()).count()},
             {"level", r->level}, {"trigger", "manual"}, {"tokens_before", r->tokens_before},
             {"tokens_after", r->tokens_after},
             {"duration_ms", std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count()},
             {"dropped_messages", r->dropped_messages}, {"truncated_messages", r->truncated_messages}};
  if (!r->summary_source.empty()) ev["summary_source"] = r->summary_source;
  if (!stats.empty()) ev["summary_request"] = stats;
  conv = std::move(r->conversation);
  {
    std::lock_guard lock(session->mu);
    session->compactions.push_back(ev);
    session->view_stats = {conv.length, conv.cut, conv.kept.size(), conv.summary ? conv.summary->tokens : 0,
                           conv.generation, conv.truncations.size(), conv.summary ? conv.summary->source : ""};
  }
  metrics_.add(fmt::format("compactions_total{{level=\"{}\",trigger=\"manual\"}}", r->level));
  (void)persist(*session, {ev});
  send_json(writer, 200, ev);
}

}  // namespace kvgate::gateway

namespace kvgate::gateway {

ApiError Gateway::context_error_message(const std::string& message) {
  return {.status = 400, .type = "invalid_request_error", .message = message, .code = "context_length_exceeded"};
}

}  // namespace kvgate::gateway
