// Gateway: durable sessions, the engine's context size, and slots kept to one key's content.
#include <fmt/format.h>

#include "gateway/gateway.h"
#include "util/json.h"
#include "util/log.h"
#include "util/time.h"

namespace kvgate::gateway {

using session::SessionStore;
using session::StoredSession;
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

void Gateway::prune_store() {
  const int64_t now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
  pruned_at_ms_ = now_ms;
  const int64_t age = options_.session_retention_age.count();
  const int64_t before = age > 0 ? util::unix_seconds_now() - age : 0;
  auto removed = store_->prune(before, options_.session_retention_count);
  if (!removed.ok()) {
    metrics_.add("session_store_errors_total{op=\"prune\"}");
    util::log_event(util::LogLevel::kError, "session_store_error", {{"error", removed.error().message()}});
    return;
  }
  metrics_.add("sessions_pruned_total", static_cast<double>(*removed));
  if (*removed > 0) util::log_event(util::LogLevel::kInfo, "sessions_pruned", {{"sessions", *removed}});
}

Status Gateway::open_store(const std::filesystem::path& path) {
  KV_ASSIGN_OR_RETURN(store_, SessionStore::open(path));
  prune_store();
  SessionStore* store = store_.get();
  responses_->attach(store);
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
  s->view_stats = Session::ViewStats::of(s->conversation);
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
  const int64_t now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
  const int64_t every_ms = options_.session_prune_every.count() * 1000;
  if (int64_t last = pruned_at_ms_.load(); now_ms - last >= every_ms && pruned_at_ms_.compare_exchange_strong(last, now_ms)) {
    prune_store();
  }
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
  if (context_generation_ == engine_.generation() && context_tokens_ > 0) return context_tokens_;
  auto res = upstream_->call("GET", "/props", "", std::chrono::seconds(10));
  if (res.ok() && res->status == 200) {
    auto j = json::parse(res->body, nullptr, false);
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
      context_generation_ = engine_.generation();
    }
  }
  return context_tokens_;
}

bool Gateway::keep_slot_private(int slot, const std::string& scope, bool own_state) {
  if (!tenants_.isolating()) return true;
  if (own_state || !tenants_.foreign(slot, scope)) {
    tenants_.hold(slot, scope);
    return true;
  }
  auto cleared = clear_slot(*upstream_, slot);
  if (!cleared.ok()) {
    tenants_.forget(slot);
    metrics_.add("slot_clear_failures_total");
    util::log_event(util::LogLevel::kWarn, "slot_clear_failed", {{"slot", slot}, {"error", cleared.error().message()}});
    return false;
  }
  metrics_.add(fmt::format("slot_clears_total{{how=\"{}\"}}", slot_clear_name(*cleared)));
  tenants_.hold(slot, scope);
  return true;
}

}  // namespace kvgate::gateway
