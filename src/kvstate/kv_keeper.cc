#include "kvstate/kv_keeper.h"

#include <algorithm>
#include <fstream>
#include <thread>

#include <fmt/format.h>
#include <xxhash.h>

#include "util/log.h"
#include "util/json.h"
#include "util/time.h"

namespace kvgate::gateway {
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {


int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The engine's answer to a slot action, or the reason there is none.
// An answer that never comes (ik_llama.cpp, now and then: the action is done, its answer is
// lost) is kUnanswered.
struct SlotAnswer {
  json body;
  bool unanswered = false;
};
Result<SlotAnswer> slot_action(Upstream& upstream, int slot, const char* action, const std::string& filename,
                               std::chrono::milliseconds timeout) {
  const std::string path = fmt::format("/slots/{}?action={}", slot, action);
  auto res = upstream.call("POST", path, util::json_text(json{{"filename", filename}}), timeout);
  if (!res.ok()) {
    if (res.error().kind == UpstreamFailure::kTimeout) return SlotAnswer{.unanswered = true};
    return Error(res.error().message);
  }
  const UpstreamResponse& r = *res;
  json body = json::parse(r.body, nullptr, false);
  if (r.status != 200 || !body.is_object()) {
    std::string message = r.body.substr(0, 300);
    if (body.is_object() && body.contains("error") && body["error"].is_object()) {
      message = body["error"].value("message", message);
    }
    return Error(fmt::format("the engine answered {}: {}", r.status, message));
  }
  return SlotAnswer{.body = std::move(body)};
}

// The token count in a sequence state file's header (magic, version, token count), 0 when it
// does not read as one.
uint64_t state_file_tokens(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  uint32_t head[3] = {0, 0, 0};
  if (!in.read(reinterpret_cast<char*>(head), sizeof head)) return 0;
  return head[0] == 0x67677371u ? head[2] : 0;  // "ggsq"
}

uint64_t count_field(const json& body, const char* name) {
  return body.contains(name) && body[name].is_number_unsigned() ? body[name].get<uint64_t>() : 0;
}

}  // namespace

uint64_t view_prefix_hash(const json& view, size_t messages, const json& body) {
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  auto feed = [st](const std::string& s) {
    const uint64_t n = s.size();
    XXH3_64bits_update(st, &n, sizeof n);  // lengths keep the pieces apart
    XXH3_64bits_update(st, s.data(), s.size());
  };
  for (const char* key : {"tools", "chat_template_kwargs"}) feed(body.contains(key) ? util::json_text(body[key]) : "");
  for (size_t i = 0; i < messages && i < view.size(); ++i) feed(util::json_text(view[i]));
  const uint64_t h = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  return h;
}

KvKeeper::KvKeeper(KvOptions options, Upstream& upstream, Metrics& metrics, int slots)
    : options_(std::move(options)), upstream_(upstream), metrics_(metrics), held_(static_cast<size_t>(std::max(slots, 1))) {
  for (size_t i = 0; i < held_.size(); ++i) slot_mu_.push_back(std::make_unique<std::mutex>());
}

Status KvKeeper::open() {
  KV_ASSIGN_OR_RETURN(files_, KvFiles::open(options_.dir, options_.disk_budget_bytes, options_.identity));
  util::log_event(util::LogLevel::kInfo, "kv_states",
                  {{"dir", options_.dir.string()},
                   {"files", files_->count()},
                   {"bytes", files_->total_bytes()},
                   {"budget_bytes", files_->budget_bytes()}});
  return util::ok_status();
}

std::chrono::milliseconds KvKeeper::engine_timeout(uint64_t bytes) const {
  // A disk that moves 50 MB/s, and never less than 3 s (a save or restore of a few hundred MB
  // takes well under a second; the time-out only bounds an answer that is lost).
  return std::chrono::milliseconds(std::max<uint64_t>(3000, bytes / 50000));
}

KvKeeper::Activity& KvKeeper::activity(const std::string& session) { return activity_[session]; }

KvKeeper::Prepared KvKeeper::prepare(int slot, const std::string& session, uint64_t generation,
                                     const json& view, const json& body, const std::string& scope) {
  if (!files_ || slot < 0 || static_cast<size_t>(slot) >= held_.size()) return {};
  std::lock_guard lock(*slot_mu_[static_cast<size_t>(slot)]);
  Held& h = held_[static_cast<size_t>(slot)];
  if (h.session == session && h.generation == generation) return {};  // the slot holds it
  if (!h.session.empty() && h.generation == generation && !h.saved) save(slot, h, "slot_reassigned");
  h = Held{.session = session, .scope = scope, .generation = generation};
  auto rec = files_->find(session);
  if (!rec && !files_->record(session)) rec = adopt(session, scope, view, body);
  if (!rec) return {};
  if (rec->prefix_messages > view.size() || view_prefix_hash(view, rec->prefix_messages, body) != rec->prefix_hash) {
    metrics_.add("kv_restores_skipped_total{reason=\"prefix_changed\"}");
    util::log_event(util::LogLevel::kInfo, "kv_restore_skipped",
                    {{"session", session}, {"slot", slot}, {"reason", "the conversation no longer starts with what was saved"}});
    return {};
  }
  const auto t0 = Clock::now();
  auto answer = slot_action(upstream_, slot, "restore", files_->file_name(session), engine_timeout(rec->bytes));
  const double ms = util::ms_since(t0);
  if (!answer.ok()) {
    // The engine refused the file (or is gone): it is no use to this engine.
    metrics_.add("kv_restore_failures_total");
    util::log_event(util::LogLevel::kWarn, "kv_restore_failed",
                    {{"session", session}, {"slot", slot}, {"error", answer.error().message()}});
    if (answer.error().message().starts_with("the engine answered")) files_->remove(session);
    return {};
  }
  if (answer->unanswered) {
    // Done, most likely, with its answer lost: the turn shows what the engine reused.
    metrics_.add("kv_actions_unanswered_total{action=\"restore\"}");
    util::log_event(util::LogLevel::kWarn, "kv_restore_unanswered", {{"session", session}, {"slot", slot}});
  }
  const uint64_t tokens = answer->unanswered ? rec->tokens : count_field(answer->body, "n_restored");
  h.prefix_hash = rec->prefix_hash;
  h.prefix_messages = rec->prefix_messages;
  h.restored_tokens = tokens;
  files_->touch(session);
  metrics_.add("kv_restores_total");
  metrics_.add("kv_restored_bytes_total", static_cast<double>(rec->bytes));
  util::log_event(util::LogLevel::kInfo, "kv_restore",
                  {{"session", session}, {"slot", slot}, {"tokens", tokens}, {"bytes", rec->bytes}, {"ms", ms}});
  {
    std::lock_guard a(activity_mu_);
    Activity& act = activity(session);
    act.last_restore_ms = unix_ms();
    act.restore_ms = ms;
  }
  return {.restored = true, .confirmed = !answer->unanswered, .tokens = tokens, .ms = ms};
}

bool KvKeeper::hold_next_prefix(int slot, const json& view, const json& body, const json& reply) {
  // The rendering the next request shares: view + reply + a next message, cut where two
  // next messages that differ in their first character part.
  std::string rendered[2];
  for (int i = 0; i < 2; ++i) {
    json b = body;
    b.erase("stream");
    b.erase("stream_options");
    b["messages"] = view;
    b["messages"].push_back(reply);
    b["messages"].push_back({{"role", "user"}, {"content", i == 0 ? "\x01x" : "\x01y"}});
    auto res = upstream_.call("POST", "/apply-template", util::json_text(b),
                              std::chrono::seconds(30));
    json answer = res.ok() && res->status == 200 ? json::parse(res->body, nullptr, false) : json();
    if (!answer.is_object() || !answer.contains("prompt") || !answer["prompt"].is_string()) return false;
    rendered[i] = answer["prompt"].get<std::string>();
  }
  size_t n = 0;
  while (n < rendered[0].size() && n < rendered[1].size() && rendered[0][n] == rendered[1][n]) ++n;
  if (n == 0 || rendered[0][n - 1] != '\x01') return false;  // not where the content starts
  json warm = {{"prompt", rendered[0].substr(0, n - 1)},
               {"n_predict", 1},  // the sampled token is not decoded: the slot holds the prompt
               {"id_slot", slot},
               {"cache_prompt", true},
               {"temperature", 0}};
  auto res = upstream_.call("POST", "/completion", util::json_text(warm),
                            std::chrono::seconds(300));
  return res.ok() && res->status == 200;
}

void KvKeeper::after_turn(int slot, const std::string& session, uint64_t generation, const json& view,
                          const json& body, const json& reply, const Turn& turn) {
  if (!files_ || slot < 0 || static_cast<size_t>(slot) >= held_.size()) return;
  std::lock_guard lock(*slot_mu_[static_cast<size_t>(slot)]);
  Held& h = held_[static_cast<size_t>(slot)];
  if (h.session == session && h.restored_tokens > 0) {
    // The prefill a restore spared: what the engine reused of the restored tokens.
    const uint64_t spared = std::min(h.restored_tokens, turn.cached_tokens);
    metrics_.add("kv_restored_tokens_reused_total", static_cast<double>(spared));
    std::lock_guard a(activity_mu_);
    activity(session).restored_tokens += spared;
  }
  h = Held{.session = session,
           .scope = h.session == session ? h.scope : std::string(),
           .generation = generation,
           .prefix_hash = view_prefix_hash(view, view.size(), body),
           .prefix_messages = view.size(),
           .saved = false};
  if (options_.exact_prefix && !hold_next_prefix(slot, view, body, reply)) {
    // What the slot holds ends inside the reply: saved, it would not be restorable.
    metrics_.add("kv_prefix_holds_failed_total");
    h.saved = true;
    return;
  }
  const uint64_t tokens = turn.prompt_tokens + turn.completion_tokens;
  uint64_t saved = 0;
  if (auto rec = files_->record(session); rec && rec->identity == options_.identity &&
                                          rec->prefix_messages <= view.size() &&
                                          view_prefix_hash(view, rec->prefix_messages, body) == rec->prefix_hash) {
    saved = rec->tokens;
  }
  const uint64_t growth = tokens > saved ? tokens - saved : 0;
  if (should_save(tokens, growth, turn.prefill_ms_per_token)) save(slot, h, "grown");
}

std::optional<KvFileRecord> KvKeeper::adopt(const std::string& session, const std::string& scope,
                                            const json& view, const json& body) {
  if (options_.siblings.empty() || scope.empty()) return std::nullopt;
  std::optional<std::pair<std::filesystem::path, KvFileRecord>> best;
  for (const auto& dir : options_.siblings) {
    for (auto& rec : KvFiles::records_in(dir)) {
      if (rec.scope != scope || rec.identity != options_.identity || rec.prefix_messages == 0 ||
          rec.prefix_messages > view.size() || (best && best->second.tokens >= rec.tokens) ||
          view_prefix_hash(view, rec.prefix_messages, body) != rec.prefix_hash) {
        continue;
      }
      best.emplace(dir, std::move(rec));
    }
  }
  if (!best) return std::nullopt;
  auto mine = files_->adopt(best->first, best->second, session);
  if (!mine.ok()) {
    metrics_.add("kv_adopt_failures_total");
    util::log_event(util::LogLevel::kWarn, "kv_adopt_failed",
                    {{"session", session}, {"error", mine.error().message()}});
    return std::nullopt;
  }
  metrics_.add("kv_adopted_total");
  util::log_event(util::LogLevel::kInfo, "kv_adopt",
                  {{"session", session},
                   {"from", best->first.string()},
                   {"from_session", best->second.session},
                   {"tokens", mine->tokens}});
  return *mine;
}

bool KvKeeper::should_save(uint64_t tokens, uint64_t growth, double prefill_ms_per_token) const {
  if (growth < options_.min_growth_tokens) return false;
  if (options_.save_every_tokens > 0) return growth >= options_.save_every_tokens;
  const double per_token = save_ms_per_token_.load();
  if (per_token <= 0) return true;  // not measured yet: this save measures it
  // Worth it when it costs at most max_save_cost of the prefill a restore of it replaces (the
  // whole state: after a restart nothing of it is cached). It runs after the answer was sent.
  const double save_ms = per_token * static_cast<double>(tokens);
  const double replaced_ms = static_cast<double>(tokens) * std::max(prefill_ms_per_token, 0.0);
  return save_ms <= options_.max_save_cost * replaced_ms;
}

bool KvKeeper::save(int slot, Held& held, const char* why) {
  const std::string temp = files_->temp_name(held.session);
  const auto t0 = Clock::now();
  auto answer = slot_action(upstream_, slot, "save", temp, engine_timeout(2 * largest_state_bytes_.load()));
  const double ms = util::ms_since(t0);
  auto failed = [&](const std::string& error) {
    files_->discard_temp(temp);
    metrics_.add("kv_save_failures_total");
    util::log_event(util::LogLevel::kWarn, "kv_save_failed",
                    {{"session", held.session}, {"slot", slot}, {"reason", why}, {"error", error}});
    return false;
  };
  if (!answer.ok()) return failed(answer.error().message());
  uint64_t tokens = count_field(answer->body, "n_saved");
  if (answer->unanswered) {
    // The engine writes the whole file before it answers: a file that reads as a state is done.
    tokens = state_file_tokens(files_->dir() / temp);
    metrics_.add("kv_actions_unanswered_total{action=\"save\"}");
    if (tokens == 0) return failed("the engine did not answer, and wrote no state");
  }
  KvFileRecord rec{.session = held.session,
                   .tokens = tokens,
                   .prefix_messages = held.prefix_messages,
                   .prefix_hash = held.prefix_hash,
                   .save_ms = ms,
                   .scope = held.scope};
  auto committed = files_->commit(temp, std::move(rec));
  if (!committed.ok()) return failed(committed.error().message());
  held.saved = true;
  if (committed->bytes > largest_state_bytes_.load()) largest_state_bytes_ = committed->bytes;
  if (committed->tokens > 0) {
    const double per_token = ms / static_cast<double>(committed->tokens);
    const double before = save_ms_per_token_.load();
    save_ms_per_token_ = before > 0 ? 0.7 * before + 0.3 * per_token : per_token;
  }
  metrics_.add(fmt::format("kv_saves_total{{reason=\"{}\"}}", why));
  metrics_.add("kv_saved_bytes_total", static_cast<double>(committed->bytes));
  metrics_.add("kv_saved_tokens_total", static_cast<double>(committed->tokens));
  util::log_event(util::LogLevel::kInfo, "kv_save",
                  {{"session", held.session},
                   {"slot", slot},
                   {"reason", why},
                   {"tokens", committed->tokens},
                   {"bytes", committed->bytes},
                   {"ms", ms}});
  std::lock_guard a(activity_mu_);
  Activity& act = activity(held.session);
  act.last_save_ms = committed->saved_at_ms;
  act.save_ms = ms;
  return true;
}

void KvKeeper::save_unsaved(uint64_t generation, const char* why, bool forget) {
  if (!files_) return;
  for (size_t i = 0; i < held_.size(); ++i) {
    std::lock_guard lock(*slot_mu_[i]);
    Held& h = held_[i];
    if (!h.session.empty() && !h.saved && h.generation == generation) save(static_cast<int>(i), h, why);
    if (forget) h = Held{};
  }
}

void KvKeeper::save_all(uint64_t generation) { save_unsaved(generation, "shutdown", false); }

void KvKeeper::before_foreign_use(uint64_t generation) { save_unsaved(generation, "foreign_use", true); }

json KvKeeper::session_info(const std::string& session) {
  if (!files_) return nullptr;
  auto rec = files_->record(session);
  std::lock_guard a(activity_mu_);
  auto it = activity_.find(session);
  if (!rec && it == activity_.end()) return nullptr;
  json out = json::object();
  if (rec) {
    out["tokens"] = rec->tokens;
    out["bytes"] = rec->bytes;
    out["saved_at_ms"] = rec->saved_at_ms;
    out["save_ms"] = rec->save_ms;
    out["usable"] = rec->identity == options_.identity;
  }
  if (it != activity_.end()) {
    if (it->second.last_restore_ms > 0) {
      out["restored_at_ms"] = it->second.last_restore_ms;
      out["restore_ms"] = it->second.restore_ms;
    }
    out["tokens_not_recomputed"] = it->second.restored_tokens;
  }
  return out;
}

void KvKeeper::gauges(std::string& out) {
  if (!files_) return;
  out += "# TYPE kvgate_kv_state_files gauge\n";
  out += fmt::format("kvgate_kv_state_files {}\n", files_->count());
  out += "# TYPE kvgate_kv_state_bytes gauge\n";
  out += fmt::format("kvgate_kv_state_bytes {}\n", files_->total_bytes());
  out += "# TYPE kvgate_kv_state_budget_bytes gauge\n";
  out += fmt::format("kvgate_kv_state_budget_bytes {}\n", files_->budget_bytes());
  out += "# TYPE kvgate_kv_state_evictions_total counter\n";
  out += fmt::format("kvgate_kv_state_evictions_total {}\n", files_->evictions());
}

}  // namespace kvgate::gateway
