// Sessions: the conversations the gateway is serving, recognised without client help.
//
// A Session holds its Conversation (what the engine sees, see conversation.h), whose hash
// chain identifies the conversation as the client last saw it — the request's messages
// plus the reply kvgate returned — and per-session counters.
//
// Every session belongs to one scope: the API key the client authenticated with ("open" on
// an instance without keys). A request only ever finds sessions of its own scope, so no key
// can reach, list or continue another key's conversation, by id or by content.
//
// SessionTable::find_or_create() maps a request to a session of its scope:
//   1. an explicit id (X-Session-Id header, `user`, ...) wins: it names a family of threads
//      (threads.h), and the request goes to the thread of that family whose history it
//      extends, or starts a sibling thread; such sessions are found by their id only, never by
//      content;
//   2. otherwise the session whose chain is the longest prefix of the request's chain (the
//      request continues that conversation, or repeats its last request);
//   3. otherwise a session whose kept messages contain the request's first two messages after
//      the same system message (the client dropped its oldest turns: a later window) — only
//      when the request also carries that session's last reply, or the last message of its
//      last request, verbatim; a window that shares a few messages but not those (another
//      agent with the same system prompt and a fixed instruction) is a new conversation.
//      (A window match chooses the session only: intake.h sends such a request its own
//      messages, so a wrong match costs cache, never content);
//   4. otherwise a session whose last reply the request carries, a third of its lines or more
//      verbatim, in its first messages after the same system message: a self-summarising
//      client (Claude Code's and Codex's auto-compaction) that asked the session for a summary
//      and replaced its history with it. The conversation goes on in that session — its slot,
//      so the engine keeps the system prompt cached — from the request's own messages (a
//      client edit; nothing of the stored history is sent);
//   5. otherwise a new session.
// What a match may do with the stored conversation is intake.h's business: recognition only
// chooses the session (its slot, its cached prefix, its compaction state).
// Memory is bounded: beyond `max_sessions` the least recently used idle session is evicted
// from memory. With a loader (the SQLite store), sessions not in memory — evicted, or from
// before a restart — are found by the same keys and loaded.
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

#include <deque>
#include <functional>

#include <nlohmann/json.hpp>

#include "session/conversation.h"
#include "session/threads.h"
#include "session/turn_log.h"

namespace kvgate::session {

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
  explicit Session(std::string session_id, std::string session_scope = kOpenScope, bool by_client_id = false)
      : id(std::move(session_id)), scope(std::move(session_scope)), explicit_id(by_client_id) {}

  static constexpr const char* kOpenScope = "open";

  const std::string id;
  const std::string scope;  // the API key's scope (see scope_of_key), "open" without keys
  const bool explicit_id;   // named by the client: found by its id only, never by content
  std::mutex turn;  // serialises this conversation's requests

  mutable std::mutex mu;  // guards everything below
  std::vector<uint64_t> chain;
  size_t last_request_messages = 0;  // messages in the last request (chain may add the reply)
  uint64_t last_reply_exact = 0;     // exact_hash() of the last reply kvgate returned (0: none)
  uint64_t last_request_exact = 0;   // exact_hash() of the last request's last message (0: none)
  size_t reply_lines = 0;            // lines of the last reply indexed for a continuation (reply_lines())
  int slot = -1;
  SessionCounters counters;
  uint64_t last_prompt_tokens = 0;
  uint64_t last_cached_tokens = 0;
  std::chrono::system_clock::time_point created = std::chrono::system_clock::now();
  std::chrono::system_clock::time_point last_used = created;
  std::string recognised_by;  // how the last request was matched: header, user, prefix, window, new
  ThreadKeys thread_keys;     // a named session's: what places its family's requests (threads.h)

  // Guarded by `turn` (only the request holding it reads or changes these).
  Conversation conversation;
  nlohmann::json last_view;    // the messages last sent upstream
  std::string last_prompt;     // their rendering (when the token counter produced it)
  uint64_t last_sent_tokens = 0;
  uint64_t engine_generation = 0;  // of the engine that served the last request
  bool template_repairs = false;   // the model's template needs the strict history repairs

  // Guarded by `mu`: a summary of the conversation for listings, and recent compactions.
  struct ViewStats {
    uint64_t length = 0, cut = 0, kept = 0, summary_tokens = 0, generation = 0, truncations = 0;
    std::string summary_source;
    static ViewStats of(const Conversation& c);
  } view_stats;
  std::deque<nlohmann::json> compactions;  // most recent last, bounded
  TurnLog turns;                           // this process's turns (not stored)

  nlohmann::json to_json() const;
};

// What recognition needs of a request's messages.
struct RequestKeys {
  std::vector<uint64_t> chain;   // chain_hashes(messages)
  std::vector<uint64_t> hashes;  // message_hash() of each message
  std::vector<uint64_t> exact;   // exact_hash() of each message
  // line_hashes() of the user messages among the first kWindowStarts after the system
  // message (a self-summarising client's continuation carries the summary there), distinct.
  std::vector<uint64_t> lines;
  bool system = false;  // the first message is a system message
  uint64_t tools = 0;   // tools_hash() of the request (threads.h)
  static RequestKeys of(const nlohmann::json& messages, uint64_t tools = 0);
};

class SessionTable {
 public:
  explicit SessionTable(size_t max_sessions = 1024) : max_sessions_(max_sessions) {}

  struct Match {
    std::shared_ptr<Session> session;
    size_t matched_messages = 0;  // length of the stored chain the request continues
    bool created = false;
    bool loaded = false;          // came from the store
    std::string how;              // "header", "user", "prefix", "window", "continuation", "new"
  };

  // Finds sessions that are not in memory (the durable store). Both may be empty.
  struct Loader {
    std::function<std::optional<std::string>(uint64_t key)> find;
    std::function<std::shared_ptr<Session>(const std::string& id)> load;
  };
  void set_loader(Loader loader);

  // Finds the request's session among those of `scope`; `explicit_id` is the id the client
  // gave (from the header or a body field named by `how_explicit`), not yet scoped.
  Match find_or_create(const std::string& scope, const RequestKeys& request, const std::optional<std::string>& explicit_id,
                       const std::string& how_explicit = "header");
  // The same in the open scope, for callers that have only the chain (no window recognition).
  Match find_or_create(const std::vector<uint64_t>& chain, const std::optional<std::string>& explicit_id,
                       const std::string& how_explicit = "header") {
    return find_or_create(Session::kOpenScope, RequestKeys{chain, {}, {}}, explicit_id, how_explicit);
  }
  // Records the conversation as the client now sees it (request + reply); re-indexes.
  void update_chain(const std::shared_ptr<Session>& session, std::vector<uint64_t> chain, size_t request_messages);
  // Replaces a session's recognition keys (chain ends and window keys).
  void set_keys(const std::shared_ptr<Session>& session, const std::vector<uint64_t>& keys);

  // Forgets a session this request created when its first turn failed or was refused: nothing
  // of it was committed, and the client's retry must not leave one empty session per attempt.
  // Kept when anyone but the table and the caller (holding `caller_refs` references) has it:
  // another request of the same conversation may be on its way.
  void discard_if_empty(const std::shared_ptr<Session>& session, long caller_refs);

  // A session of `scope` by its id (nullptr when there is none, or it is another scope's).
  std::shared_ptr<Session> get(const std::string& id, const std::string& scope);
  // The sessions of `scope` in memory, most recently used first.
  std::vector<std::shared_ptr<Session>> list(const std::string& scope);
  // For kvgate itself (saving, status), not for answering a client: a session in memory by
  // id whatever its scope, and every session in memory.
  std::shared_ptr<Session> in_memory(const std::string& id);
  std::vector<std::shared_ptr<Session>> list_all();
  size_t size();
  uint64_t evictions();

 private:
  void touch(const std::string& id);   // REQUIRES: mu_ held
  void evict_if_needed();              // REQUIRES: mu_ held
  void unindex(const Session& s);      // REQUIRES: mu_ held (and s.mu)
  std::shared_ptr<Session> create(std::string id, const std::string& scope, bool explicit_id);  // REQUIRES: mu_ held
  std::shared_ptr<Session> adopt(std::shared_ptr<Session> s);  // REQUIRES: mu_ held
  // Step 3 and 4 of find_or_create(). REQUIRES: mu_ held
  std::shared_ptr<Session> find_window(const std::string& scope, const RequestKeys& request, bool* loaded);
  std::shared_ptr<Session> find_continuation(const std::string& scope, const RequestKeys& request, bool* loaded);
  // Step 1: the thread of the family `client_id` names that the request belongs to, or a new
  // one (threads.h). REQUIRES: mu_ held
  void find_thread(const std::string& scope, const std::string& client_id, const RequestKeys& request, Match& m);
  // The session of `scope` indexed (or stored) under `key`. REQUIRES: mu_ held
  std::shared_ptr<Session> lookup_key(const std::string& scope, uint64_t key, bool* loaded);

  Loader loader_;

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

// The scope of an API key: a hash of it, so neither the key nor its length is stored.
std::string scope_of_key(std::string_view api_key);
// The table's id for a session the client named `client_id` in `scope`.
std::string scoped_session_id(const std::string& scope, const std::string& client_id);
// `key` (a chain hash) as an index key of `scope`.
uint64_t scoped_key(const std::string& scope, uint64_t key);
// Key under which a session is found by a request that starts, after the system message
// with hash `system_hash`, with two consecutive kept messages of hashes `first`, `second`.
uint64_t window_key(const std::string& scope, uint64_t system_hash, uint64_t first, uint64_t second);
// The same from two messages' exact hashes, for a window that starts before the cut.
uint64_t exact_window_key(const std::string& scope, uint64_t system_hash, uint64_t first, uint64_t second);
// How many pairs of messages before the cut a session is found by.
inline constexpr size_t kMaxEarlyWindowKeys = 512;
// How many of a request's first messages a later window is looked up by.
inline constexpr size_t kWindowStarts = 8;
// All recognition keys of a conversation in `scope`: its chain end, the end of its last
// request, the window keys of its kept messages and the line keys of its last reply. None for a session named by its client
// (`explicit_id`): it is found by its id only.
std::vector<uint64_t> recognition_keys(const std::string& scope, bool explicit_id, const Conversation& c,
                                       uint64_t request_messages);
std::vector<uint64_t> recognition_keys(const Session& s);  // REQUIRES: s.mu held, and s.turn or s unshared
// What places a named session's family's requests (threads.h). REQUIRES: as recognition_keys().
ThreadKeys thread_keys_of(const Session& s);
// The trimmed lines of `text` at least kCarriedLineBytes long, as hashes: the first `max_lines`
// (distinct when `distinct`). What a continuation is recognised by: a reply's lines survive a
// client's re-wrapping of the summary (tags dropped, blank lines collapsed) verbatim.
inline constexpr size_t kCarriedLineBytes = 32;
inline constexpr size_t kMaxCarriedLines = 64;
// How much of a request's first user messages is looked at for a continuation.
inline constexpr size_t kCarriedTextBytes = 64 * 1024;
std::vector<uint64_t> line_hashes(std::string_view text, size_t max_lines = kMaxCarriedLines, bool distinct = true);
// Key under which a session is found by a line of its last reply (after the system message
// with hash `system_hash`, 0 without one).
uint64_t reply_line_key(const std::string& scope, uint64_t system_hash, uint64_t line_hash);
// line_hashes() of the conversation's last message when it is a reply kvgate returned.
std::vector<uint64_t> reply_lines(const Conversation& c);
// exact_hash() of the conversation's last message when it is a reply kvgate returned, else 0.
uint64_t last_reply_exact(const Conversation& c);
// exact_hash() of the last message of the conversation's last request, else 0.
uint64_t last_request_exact(const Conversation& c, uint64_t request_messages);

}  // namespace kvgate::session
