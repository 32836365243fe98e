// SessionStore: durable sessions in SQLite (WAL journal, synchronous=FULL).
//
// One row per session holds its state (the Conversation as JSON, counters, slot); a key
// table maps chain hashes to sessions so a request can be recognised after a restart; a
// compaction log keeps each session's history of compactions. save() writes all of one
// request's changes in one transaction, and the gateway calls it before the client receives
// the end of its answer, so an answered turn is never lost — also across kill -9.
//
// open() creates or checks the schema (versioned in the `meta` table). A corrupt file, a
// newer schema, a read-only or locked database are errors naming the file and what to do;
// nothing is silently recreated. A lock held by another process makes a save wait up to 2 s
// and a lookup up to 250 ms (a request's recognition must not stall behind it) before it
// fails. Thread-safe: one connection behind a mutex.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/result.h"

struct sqlite3;

namespace kvgate::session {

inline constexpr int kSessionStoreSchema = 1;

struct StoredSession {
  std::string id;
  nlohmann::json state;     // Conversation::to_json()
  nlohmann::json counters;  // SessionCounters and other per-session figures
  int slot = -1;
  int64_t created = 0;      // unix seconds
  int64_t last_used = 0;
};

// A Responses API answer kept for previous_response_id (JSON texts). It holds only what its
// request added: the conversation after it is its parent's (resolved along `parent`, root
// first), then `messages`. A response stored before parents were kept has the whole
// conversation in `messages` and no parent.
struct StoredResponse {
  std::string scope;     // the key scope that made it: no other may read it
  int64_t created = 0;   // unix seconds
  std::string response;  // the response object
  std::string messages;  // chat messages its request's input and answer added, without instructions
  std::string parent;    // the previous_response_id it continued; empty: none
  size_t bytes() const { return response.size() + messages.size() + parent.size(); }
};

// How much of the responses table a save keeps (0: no bound): the newest `keep` rows, the
// newest of each scope within `scope_bytes`, the newest within `total_bytes`.
struct ResponseBudget {
  int64_t keep = 20000;
  int64_t scope_bytes = 0;
  int64_t total_bytes = 0;
};

class SessionStore {
 public:
  static Result<std::unique_ptr<SessionStore>> open(const std::filesystem::path& path);
  ~SessionStore();
  SessionStore(const SessionStore&) = delete;
  SessionStore& operator=(const SessionStore&) = delete;

  // Upserts the session, replaces its recognition keys, appends compaction events; atomic.
  Status save(const StoredSession& session, const std::vector<uint64_t>& keys,
              const std::vector<nlohmann::json>& new_compactions = {});
  Result<std::optional<StoredSession>> load(const std::string& id);
  Result<std::optional<std::string>> find_by_key(uint64_t key);
  Result<std::vector<nlohmann::json>> compactions(const std::string& id, int limit = 100);
  Status remove(const std::string& id);
  Result<uint64_t> count();
  // Retention: removes the sessions last used before `used_before` (unix seconds; 0: no age
  // bound) and all but the `keep_newest` most recently used (0: no count bound), with their
  // keys and compaction history, and the responses created before `used_before`. Returns how
  // many sessions went.
  Result<uint64_t> prune(int64_t used_before, int64_t keep_newest);
  // Saves a response under `id`, then drops the oldest beyond `budget`.
  Status save_response(const std::string& id, const StoredResponse& r, const ResponseBudget& budget);
  Result<std::optional<StoredResponse>> load_response(const std::string& id);
  const std::filesystem::path& path() const { return path_; }

 private:
  SessionStore(sqlite3* db, std::filesystem::path path) : db_(db), path_(std::move(path)) {}
  Status exec(const char* sql);  // REQUIRES: mu_ held
  void busy_wait(int ms);        // REQUIRES: mu_ held; how long a locked database is waited for

  std::mutex mu_;
  sqlite3* db_;
  std::filesystem::path path_;
};

}  // namespace kvgate::session
