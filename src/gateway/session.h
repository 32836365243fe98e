// Sessions: the conversations the gateway is serving, recognised without client help.
//
// A Session records the hash chain (normalize.h) of its conversation as the client last
// saw it — the request's messages plus the reply kvgate returned — and per-session
// counters. SessionTable::find_or_create() maps a request to a session:
//   1. an explicit id (X-Session-Id header or the `user` field) wins;
//   2. otherwise the stored session whose chain is the longest prefix of the request's
//      chain (the request continues that conversation, or repeats its last request);
//   3. otherwise a new session.
// Memory is bounded: beyond `max_sessions` the least recently used idle session is evicted.
//
// Thread-safety: SessionTable is internally locked (mu_). A Session's `turn` mutex
// serialises the requests of one conversation (held by the request handler for the whole
// request); its data fields are guarded by its own `mu`. Lock order: turn → table mu_ →
// session mu. Sessions are shared_ptr so an evicted session stays valid for a request
// still holding it.
#pragma once

#include <chrono>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

namespace kvgate::gateway {

struct SessionCounters {
  uint64_t requests = 0;
  uint64_t errors = 0;
  uint64_t prompt_tokens = 0;     // as reported by the engine
  uint64_t cached_tokens = 0;     // served from the engine's cache
  uint64_t prefilled_tokens = 0;  // computed by the engine
  uint64_t completion_tokens = 0;
  double ttft_ms_total = 0;
  double decode_ms_total = 0;
};

class Session {
 public:
  explicit Session(std::string session_id) : id(std::move(session_id)) {}

  const std::string id;
  std::mutex turn;  // serialises this conversation's requests

  mutable std::mutex mu;  // guards everything below
  std::vector<uint64_t> chain;
  size_t last_request_messages = 0;  // messages in the last request (chain may add the reply)
  int slot = -1;
  SessionCounters counters;
  uint64_t last_prompt_tokens = 0;
  uint64_t last_cached_tokens = 0;
  std::chrono::system_clock::time_point created = std::chrono::system_clock::now();
  std::chrono::system_clock::time_point last_used = created;
  std::string recognised_by;  // how the last request was matched: header, user, prefix, new

  nlohmann::json to_json() const;
};

class SessionTable {
 public:
  explicit SessionTable(size_t max_sessions = 1024) : max_sessions_(max_sessions) {}

  struct Match {
    std::shared_ptr<Session> session;
    size_t matched_messages = 0;  // length of the stored chain the request continues
    bool created = false;
    std::string how;              // "header", "user", "prefix", "new"
  };

  // `chain` is the request's message chain; `explicit_id` comes from the header or `user`.
  Match find_or_create(const std::vector<uint64_t>& chain, const std::optional<std::string>& explicit_id,
                       const std::string& how_explicit = "header");
  // Records the conversation as the client now sees it (request + reply); re-indexes.
  void update_chain(const std::shared_ptr<Session>& session, std::vector<uint64_t> chain, size_t request_messages);

  std::shared_ptr<Session> get(const std::string& id);
  std::vector<std::shared_ptr<Session>> list();
  size_t size();
  uint64_t evictions();

 private:
  void touch(const std::string& id);   // REQUIRES: mu_ held
  void evict_if_needed();              // REQUIRES: mu_ held
  void unindex(const Session& s);      // REQUIRES: mu_ held (and s.mu)
  std::shared_ptr<Session> create(std::string id);  // REQUIRES: mu_ held

  const size_t max_sessions_;
  std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<Session>> sessions_;
  std::unordered_map<uint64_t, std::string> by_chain_end_;  // chain hash → session id
  std::unordered_map<std::string, std::vector<uint64_t>> keys_;  // session id → its index keys
  std::list<std::string> lru_;  // front = most recent
  std::unordered_map<std::string, std::list<std::string>::iterator> lru_pos_;
  uint64_t evictions_ = 0;
};

// Pins sessions to engine slots (`id_slot`) so parallel agents do not evict each other's
// KV cache: a session keeps its slot; a new session takes a free slot or the least
// recently used one. Thread-safe.
class SlotPool {
 public:
  explicit SlotPool(int slots) : owners_(static_cast<size_t>(slots > 0 ? slots : 1)), last_use_(owners_.size(), 0) {}
  // Returns the slot for `session_id` and whether it was newly (re)assigned.
  std::pair<int, bool> acquire(const std::string& session_id);
  int size() const { return static_cast<int>(owners_.size()); }
  nlohmann::json to_json() const;

 private:
  mutable std::mutex mu_;
  std::vector<std::string> owners_;
  std::vector<uint64_t> last_use_;
  uint64_t clock_ = 0;
};

std::string new_session_id();

}  // namespace kvgate::gateway
