#include "session/session.h"

#include <algorithm>
#include <cctype>
#include <random>

#include <fmt/format.h>

#include "session/compactor.h"
#include "session/normalize.h"

namespace kvgate::session {

std::string new_session_id() {
  static std::mutex mu;
  static std::mt19937_64 rng(std::random_device{}());
  std::lock_guard lock(mu);
  return fmt::format("s_{:016x}", rng());
}

std::string scope_of_key(std::string_view api_key) {
  return fmt::format("k{:016x}", hash64(std::string("kvgate-scope\n") + std::string(api_key)));
}

std::string scoped_session_id(const std::string& scope, const std::string& client_id) {
  return scope + "~" + client_id;
}

uint64_t scoped_key(const std::string& scope, uint64_t key) { return chain_step(hash64(scope), key); }

uint64_t window_key(const std::string& scope, uint64_t system_hash, uint64_t first, uint64_t second) {
  return scoped_key(scope, chain_step(chain_step(system_hash ^ 0x77696e646f77ULL, first), second));
}

uint64_t exact_window_key(const std::string& scope, uint64_t system_hash, uint64_t first, uint64_t second) {
  return scoped_key(scope, chain_step(chain_step(system_hash ^ 0x6578616374ULL, first), second));
}

std::vector<uint64_t> recognition_keys(const std::string& scope, bool explicit_id, const Conversation& c,
                                       uint64_t request_messages) {
  std::vector<uint64_t> keys;
  if (explicit_id) return keys;
  if (!c.chain.empty()) keys.push_back(scoped_key(scope, c.chain.back()));
  if (request_messages > 0 && request_messages < c.chain.size()) {
    keys.push_back(scoped_key(scope, c.chain[request_messages - 1]));
  }
  if (c.system) {
    for (size_t i = 0; i + 1 < c.kept.size(); ++i) {
      keys.push_back(window_key(scope, c.system->hash, c.kept[i].hash, c.kept[i + 1].hash));
    }
    // A window may start before the cut (at messages kvgate summarised or dropped, which it
    // keeps only the exact hashes of): pairs from there, the newest kMaxEarlyWindowKeys.
    const size_t end = std::min<size_t>(c.exact.size(), static_cast<size_t>(c.first_kept()) + 1);
    const size_t begin = end > kMaxEarlyWindowKeys + 2 ? end - kMaxEarlyWindowKeys - 1 : 1;
    for (size_t i = begin; i + 1 < end; ++i) {
      if (c.exact[i] != 0) keys.push_back(exact_window_key(scope, c.system->hash, c.exact[i], c.exact[i + 1]));
    }
  }
  for (uint64_t line : reply_lines(c)) keys.push_back(reply_line_key(scope, c.system ? c.system->hash : 0, line));
  return keys;
}

ThreadKeys thread_keys_of(const Session& s) {
  ThreadKeys k;
  k.identity = thread_identity(s.conversation);
  k.chain = s.conversation.chain;
  k.request_messages = s.last_request_messages;
  k.last_reply_exact = last_reply_exact(s.conversation);
  k.last_request_exact = last_request_exact(s.conversation, s.last_request_messages);
  k.reply_lines = reply_lines(s.conversation);
  return k;
}

std::vector<uint64_t> recognition_keys(const Session& s) {
  return recognition_keys(s.scope, s.explicit_id, s.conversation, s.last_request_messages);
}

std::vector<uint64_t> line_hashes(std::string_view text, size_t max_lines, bool distinct) {
  std::vector<uint64_t> out;
  size_t at = 0;
  while (at < text.size() && out.size() < max_lines) {
    size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(at, end - at);
    at = end + 1;
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.front())) != 0) line.remove_prefix(1);
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back())) != 0) line.remove_suffix(1);
    if (line.size() < kCarriedLineBytes) continue;
    const uint64_t h = hash64(line);
    if (distinct && std::find(out.begin(), out.end(), h) != out.end()) continue;
    out.push_back(h);
  }
  return out;
}

uint64_t reply_line_key(const std::string& scope, uint64_t system_hash, uint64_t line_hash) {
  return scoped_key(scope, chain_step(system_hash ^ 0x7265706c79ULL, line_hash));
}

std::vector<uint64_t> reply_lines(const Conversation& c) {
  if (c.length == 0 || c.length - 1 < c.first_kept() || c.replies.count(c.length - 1) == 0) return {};
  return line_hashes(message_text(c.at(c.length - 1).message));
}

uint64_t last_reply_exact(const Conversation& c) {
  if (c.length == 0 || c.replies.count(c.length - 1) == 0 || c.exact.size() != c.length) return 0;
  return c.exact.back();
}

uint64_t last_request_exact(const Conversation& c, uint64_t request_messages) {
  if (request_messages == 0 || request_messages > c.length || c.exact.size() != c.length) return 0;
  return c.exact[request_messages - 1];
}

RequestKeys RequestKeys::of(const nlohmann::json& messages, uint64_t tools) {
  RequestKeys r;
  r.tools = tools;
  if (!messages.is_array()) return r;
  for (const auto& m : messages) {
    r.hashes.push_back(message_hash(m));
    extend_chain(r.chain, r.hashes.back());
    r.exact.push_back(exact_hash(m));
  }
  r.system = !messages.empty() && messages[0].is_object() && messages[0].value("role", "") == "system";
  const size_t first = r.system ? 1 : 0;
  size_t bytes = 0;
  for (size_t i = first; i < messages.size() && i < first + kWindowStarts && bytes < kCarriedTextBytes; ++i) {
    if (!messages[i].is_object() || messages[i].value("role", "") != "user") continue;
    std::string text = message_text(messages[i]);
    if (text.size() > kCarriedTextBytes - bytes) text.resize(kCarriedTextBytes - bytes);
    bytes += text.size();
    for (uint64_t h : line_hashes(text, kMaxCarriedLines * 4 - r.lines.size())) {
      if (std::find(r.lines.begin(), r.lines.end(), h) == r.lines.end()) r.lines.push_back(h);
    }
    if (r.lines.size() >= kMaxCarriedLines * 4) break;
  }
  return r;
}

Session::ViewStats Session::ViewStats::of(const Conversation& c) {
  return {.length = c.length,
          .cut = c.cut,
          .kept = c.kept.size(),
          .summary_tokens = c.summary ? c.summary->tokens : 0,
          .generation = c.generation,
          .truncations = c.truncations.size(),
          .summary_source = c.summary ? c.summary->source : ""};
}

nlohmann::json Session::to_json() const {
  std::lock_guard lock(mu);
  auto secs = [](std::chrono::system_clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
  };
  const double hit = counters.prompt_tokens == 0
                         ? 0.0
                         : static_cast<double>(counters.cached_tokens) / static_cast<double>(counters.prompt_tokens);
  nlohmann::json history = nlohmann::json::array();
  for (const auto& c : compactions) history.push_back(c);
  return {{"id", id},
          {"named_by_client", explicit_id},
          {"messages", view_stats.length},
          {"slot", slot},
          {"recognised_by", recognised_by},
          {"created", secs(created)},
          {"last_used", secs(last_used)},
          {"last_prompt_tokens", last_prompt_tokens},
          {"last_cached_tokens", last_cached_tokens},
          {"requests", counters.requests},
          {"errors", counters.errors},
          {"prompt_tokens", counters.prompt_tokens},
          {"cached_tokens", counters.cached_tokens},
          {"prefilled_tokens", counters.prefilled_tokens},
          {"completion_tokens", counters.completion_tokens},
          {"cache_hit_ratio", hit},
          {"mean_ttft_ms", counters.requests ? counters.ttft_ms_total / static_cast<double>(counters.requests) : 0.0},
          {"view",
           {{"cut", view_stats.cut},
            {"kept_messages", view_stats.kept},
            {"summary_tokens", view_stats.summary_tokens},
            {"summary_source", view_stats.summary_source},
            {"truncated_messages", view_stats.truncations},
            {"compactions", view_stats.generation}}},
          {"compaction_history", history},
          {"turns", turns.summary(50)}};
}

void SessionTable::set_loader(Loader loader) {
  std::lock_guard lock(mu_);
  loader_ = std::move(loader);
}

std::shared_ptr<Session> SessionTable::adopt(std::shared_ptr<Session> s) {
  sessions_[s->id] = s;
  lru_.push_front(s->id);
  lru_pos_[s->id] = lru_.begin();
  std::vector<uint64_t> keys;
  {
    std::lock_guard slock(s->mu);
    keys = recognition_keys(*s);
    s->last_reply_exact = last_reply_exact(s->conversation);
    s->last_request_exact = last_request_exact(s->conversation, s->last_request_messages);
    if (s->explicit_id) s->thread_keys = thread_keys_of(*s);
  }
  auto& own = keys_[s->id];
  for (uint64_t k : keys) {
    by_chain_end_[k] = s->id;
    own.push_back(k);
  }
  return s;
}

std::shared_ptr<Session> SessionTable::lookup_key(const std::string& scope, uint64_t key, bool* loaded) {
  // Keys are scoped already; the checks below are a second line: a session found by content
  // is always one of the caller's scope and never one its client named.
  auto usable = [&scope](const Session& s) { return s.scope == scope && !s.explicit_id; };
  if (auto it = by_chain_end_.find(key); it != by_chain_end_.end()) {
    if (auto s = sessions_.find(it->second); s != sessions_.end()) return usable(*s->second) ? s->second : nullptr;
  }
  if (!loader_.find || !loader_.load) return nullptr;
  auto id = loader_.find(key);
  if (!id) return nullptr;
  // A session in memory is indexed by its current keys (above); the store naming it for a key
  // it no longer has is out of date (a save that failed, or one still to come).
  if (sessions_.count(*id) != 0) return nullptr;
  auto s = loader_.load(*id);
  if (!s || !usable(*s)) return nullptr;
  *loaded = true;
  return adopt(std::move(s));
}

SessionTable::Match SessionTable::find_or_create(const std::string& scope, const RequestKeys& request,
                                                 const std::optional<std::string>& explicit_id,
                                                 const std::string& how_explicit) {
  std::lock_guard lock(mu_);
  Match m;
  const auto& chain = request.chain;
  if (explicit_id) {
    find_thread(scope, *explicit_id, request, m);
    m.how = how_explicit;
  } else {
    for (size_t k = chain.size(); k > 0 && !m.session; --k) {
      if (auto s = lookup_key(scope, scoped_key(scope, chain[k - 1]), &m.loaded)) {
        m.session = s;
        m.matched_messages = k;
        m.how = "prefix";
      }
    }
    if (!m.session && (m.session = find_window(scope, request, &m.loaded))) m.how = "window";
    if (!m.session && (m.session = find_continuation(scope, request, &m.loaded))) m.how = "continuation";
    if (!m.session) {
      m.session = create(new_session_id(), scope, false);
      m.created = true;
      m.how = "new";
    }
  }
  touch(m.session->id);
  {
    std::lock_guard slock(m.session->mu);
    m.session->last_used = std::chrono::system_clock::now();
    m.session->recognised_by = m.how;
  }
  evict_if_needed();
  return m;
}

void SessionTable::find_thread(const std::string& scope, const std::string& client_id, const RequestKeys& request,
                               Match& m) {
  std::shared_ptr<Session> best, idle_oldest;
  ThreadFit best_fit;
  bool best_loaded = false;
  std::string free_id;
  for (int n = 1; n <= kMaxThreads; ++n) {
    const std::string id = thread_session_id(scope, client_id, n);
    std::shared_ptr<Session> s;
    bool loaded = false;
    if (auto it = sessions_.find(id); it != sessions_.end()) {
      s = it->second;
    } else if (loader_.load) {
      if ((s = loader_.load(id))) {
        s = adopt(std::move(s));
        loaded = true;
      }
    }
    if (!s) {
      if (free_id.empty()) free_id = id;
      continue;
    }
    // Cannot happen with ids made here (the scope is part of the id); refuse rather than trust it.
    if (s->scope != scope || !s->explicit_id) continue;
    ThreadFit fit;
    std::chrono::system_clock::time_point used;
    {
      std::lock_guard slock(s->mu);
      fit = thread_fit(s->thread_keys, request);
      used = s->last_used;
    }
    auto last_used = [](const std::shared_ptr<Session>& x) {
      std::lock_guard slock(x->mu);
      return x->last_used;
    };
    if (fit.belongs && (!best || fit.shared > best_fit.shared ||
                        (fit.shared == best_fit.shared && used > last_used(best)))) {
      best = s;
      best_fit = fit;
      best_loaded = loaded;
    }
    if (s.use_count() <= 2 && (!idle_oldest || used < last_used(idle_oldest))) idle_oldest = s;
  }
  if (best) {
    m.session = best;
    m.matched_messages = best_fit.shared;
    m.loaded = best_loaded;
    return;
  }
  if (free_id.empty()) {
    // The family is full: its least recently used idle thread makes way (its state goes; a
    // request of it still running keeps its own copy).
    free_id = idle_oldest ? idle_oldest->id : thread_session_id(scope, client_id, kMaxThreads);
    if (auto it = sessions_.find(free_id); it != sessions_.end()) {
      {
        std::lock_guard slock(it->second->mu);
        unindex(*it->second);
      }
      if (auto pos = lru_pos_.find(free_id); pos != lru_pos_.end()) {
        lru_.erase(pos->second);
        lru_pos_.erase(pos);
      }
      sessions_.erase(it);
    }
  }
  m.session = create(free_id, scope, true);
  m.created = true;
  // Until its first turn commits, a new thread is known by the request that started it: the
  // same request sent again before its answer (a client's early retry) joins it instead of
  // starting another sibling.
  std::lock_guard slock(m.session->mu);
  m.session->thread_keys.identity = thread_identity(request);
  m.session->thread_keys.chain = request.chain;
  m.session->thread_keys.request_messages = request.chain.size();
}

std::shared_ptr<Session> SessionTable::find_window(const std::string& scope, const RequestKeys& request,
                                                   bool* loaded) {
  // A later window of a known conversation: the system message, then two of its messages
  // in a row among the request's first few (a window may begin with tool results whose call
  // it dropped, which history repair changes) — and the request carries the session's last
  // reply, or the last message of its last request, verbatim.
  const auto& hashes = request.hashes;
  if (hashes.size() < 3) return nullptr;
  bool found_loaded = false;
  std::shared_ptr<Session> s;
  for (size_t j = 1; !s && j + 1 < hashes.size() && j <= kWindowStarts; ++j) {
    s = lookup_key(scope, window_key(scope, hashes[0], hashes[j], hashes[j + 1]), &found_loaded);
    if (!s && request.exact.size() == hashes.size()) {
      s = lookup_key(scope, exact_window_key(scope, hashes[0], request.exact[j], request.exact[j + 1]), &found_loaded);
    }
  }
  if (!s) return nullptr;
  uint64_t reply = 0, tail = 0;
  {
    std::lock_guard slock(s->mu);
    reply = s->last_reply_exact;
    tail = s->last_request_exact;
  }
  auto carried = [&request](uint64_t h) {
    return h != 0 && std::find(request.exact.begin() + 1, request.exact.end(), h) != request.exact.end();
  };
  if (!carried(reply) && !carried(tail)) return nullptr;
  *loaded = found_loaded;
  return s;
}

std::shared_ptr<Session> SessionTable::find_continuation(const std::string& scope, const RequestKeys& request,
                                                         bool* loaded) {
  if (request.lines.empty()) return nullptr;
  const uint64_t system = request.system ? request.hashes[0] : 0;
  struct Tally {
    std::shared_ptr<Session> session;
    size_t hits = 0;
    bool loaded = false;
  };
  std::unordered_map<std::string, Tally> tallies;
  for (uint64_t line : request.lines) {
    bool was_loaded = false;
    auto s = lookup_key(scope, reply_line_key(scope, system, line), &was_loaded);
    if (!s) continue;
    Tally& t = tallies[s->id];
    t.session = std::move(s);
    t.loaded = t.loaded || was_loaded;
    ++t.hits;
  }
  const Tally* best = nullptr;
  for (const auto& [id, t] : tallies) {
    size_t lines = 0;
    {
      std::lock_guard slock(t.session->mu);
      lines = t.session->reply_lines;
    }
    // A third of the reply's lines: a client that re-wraps the summary (drops an analysis
    // section or tags) still carries that much; a reply's stock phrase or two does not.
    if (lines == 0 || t.hits * 3 < lines) continue;
    if (best == nullptr || t.hits > best->hits) best = &t;
  }
  if (best == nullptr) return nullptr;
  *loaded = best->loaded;
  return best->session;
}

void SessionTable::update_chain(const std::shared_ptr<Session>& session, std::vector<uint64_t> chain,
                                size_t request_messages) {
  std::lock_guard lock(mu_);
  std::lock_guard slock(session->mu);
  unindex(*session);
  session->chain = std::move(chain);
  session->last_request_messages = request_messages;
  if (session->explicit_id) {  // found by its id only: what places its family's requests
    session->thread_keys.identity = thread_identity(session->conversation);
    session->thread_keys.chain = session->chain;
    session->thread_keys.request_messages = request_messages;
    return;
  }
  if (sessions_.find(session->id) == sessions_.end()) return;  // evicted meanwhile: keep it unindexed
  auto& keys = keys_[session->id];
  auto add = [&](uint64_t key) {
    by_chain_end_[key] = session->id;
    keys.push_back(key);
  };
  if (!session->chain.empty()) add(scoped_key(session->scope, session->chain.back()));
  if (request_messages > 0 && request_messages < session->chain.size()) {
    add(scoped_key(session->scope, session->chain[request_messages - 1]));
  }
}

void SessionTable::set_keys(const std::shared_ptr<Session>& session, const std::vector<uint64_t>& keys) {
  std::lock_guard lock(mu_);
  std::lock_guard slock(session->mu);
  unindex(*session);
  session->last_reply_exact = last_reply_exact(session->conversation);
  session->last_request_exact = last_request_exact(session->conversation, session->last_request_messages);
  session->reply_lines = session->explicit_id ? 0 : reply_lines(session->conversation).size();
  if (session->explicit_id) session->thread_keys = thread_keys_of(*session);
  if (sessions_.find(session->id) == sessions_.end()) return;
  auto& own = keys_[session->id];
  for (uint64_t k : keys) {
    by_chain_end_[k] = session->id;
    own.push_back(k);
  }
}

void SessionTable::unindex(const Session& s) {
  auto it = keys_.find(s.id);
  if (it == keys_.end()) return;
  for (uint64_t key : it->second) {
    auto k = by_chain_end_.find(key);
    if (k != by_chain_end_.end() && k->second == s.id) by_chain_end_.erase(k);
  }
  keys_.erase(it);
}

std::shared_ptr<Session> SessionTable::create(std::string id, const std::string& scope, bool explicit_id) {
  auto s = std::make_shared<Session>(id, scope, explicit_id);
  sessions_[id] = s;
  lru_.push_front(id);
  lru_pos_[id] = lru_.begin();
  return s;
}

void SessionTable::touch(const std::string& id) {
  auto it = lru_pos_.find(id);
  if (it == lru_pos_.end()) return;
  lru_.splice(lru_.begin(), lru_, it->second);
}

void SessionTable::evict_if_needed() {
  auto it = lru_.end();
  while (sessions_.size() > max_sessions_ && it != lru_.begin()) {
    --it;
    auto s = sessions_.find(*it);
    if (s == sessions_.end()) continue;
    // Only idle sessions go: one whose request is running keeps its place.
    std::unique_lock turn(s->second->turn, std::try_to_lock);
    if (!turn.owns_lock() || s->second.use_count() > 1) continue;
    {
      std::lock_guard slock(s->second->mu);
      unindex(*s->second);
    }
    turn.unlock();
    lru_pos_.erase(*it);
    sessions_.erase(s);
    it = lru_.erase(it);
    ++evictions_;
  }
}

void SessionTable::discard_if_empty(const std::shared_ptr<Session>& session, long caller_refs) {
  std::lock_guard lock(mu_);  // every other way to a session goes through mu_
  auto it = sessions_.find(session->id);
  if (it == sessions_.end() || it->second != session) return;
  if (session.use_count() > 1 + caller_refs) return;
  {
    std::lock_guard slock(session->mu);
    if (!session->chain.empty()) return;
    unindex(*session);
  }
  if (auto pos = lru_pos_.find(session->id); pos != lru_pos_.end()) {
    lru_.erase(pos->second);
    lru_pos_.erase(pos);
  }
  sessions_.erase(it);
}

std::shared_ptr<Session> SessionTable::get(const std::string& id, const std::string& scope) {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(id);
  if (it != sessions_.end()) return it->second->scope == scope ? it->second : nullptr;
  if (loader_.load) {
    auto s = loader_.load(id);
    if (s && s->scope == scope) return adopt(std::move(s));
  }
  return nullptr;
}

std::vector<std::shared_ptr<Session>> SessionTable::list(const std::string& scope) {
  std::lock_guard lock(mu_);
  std::vector<std::shared_ptr<Session>> out;
  for (const auto& id : lru_) {
    const auto& s = sessions_.at(id);
    if (s->scope == scope) out.push_back(s);
  }
  return out;
}

std::shared_ptr<Session> SessionTable::in_memory(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(id);
  return it == sessions_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<Session>> SessionTable::list_all() {
  std::lock_guard lock(mu_);
  std::vector<std::shared_ptr<Session>> out;
  for (const auto& id : lru_) out.push_back(sessions_.at(id));
  return out;
}

size_t SessionTable::size() {
  std::lock_guard lock(mu_);
  return sessions_.size();
}

uint64_t SessionTable::evictions() {
  std::lock_guard lock(mu_);
  return evictions_;
}

std::pair<int, bool> SlotPool::acquire(const std::string& session_id) {
  std::lock_guard lock(mu_);
  ++clock_;
  for (size_t i = 0; i < owners_.size(); ++i) {
    if (owners_[i] == session_id) {
      last_use_[i] = clock_;
      return {static_cast<int>(i), false};
    }
  }
  size_t pick = 0;
  for (size_t i = 0; i < owners_.size(); ++i) {
    if (owners_[i].empty()) {
      pick = i;
      break;
    }
    if (last_use_[i] < last_use_[pick]) pick = i;
  }
  owners_[pick] = session_id;
  last_use_[pick] = clock_;
  return {static_cast<int>(pick), true};
}

nlohmann::json SlotPool::to_json() const {
  std::lock_guard lock(mu_);
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < owners_.size(); ++i) {
    out.push_back({{"id", i}, {"session", owners_[i].empty() ? nlohmann::json(nullptr) : nlohmann::json(owners_[i])}});
  }
  return out;
}

}  // namespace kvgate::session
