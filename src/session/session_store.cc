#include "session/session_store.h"

#include <sqlite3.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "util/path_text.h"
#include "util/private_files.h"
#include "util/json.h"

namespace kvgate::session {
namespace {

// RAII for a prepared statement.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql) { rc_ = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr); }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  bool ok() const { return rc_ == SQLITE_OK; }
  sqlite3_stmt* get() { return stmt_; }
  void bind(int i, const std::string& s) { sqlite3_bind_text(stmt_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT); }
  void bind(int i, int64_t v) { sqlite3_bind_int64(stmt_, i, v); }
  void bind(int i, double v) { sqlite3_bind_double(stmt_, i, v); }
  int step() { return sqlite3_step(stmt_); }
  std::string text(int col) {
    const auto* p = sqlite3_column_text(stmt_, col);
    return p ? std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(sqlite3_column_bytes(stmt_, col))) : "";
  }
  int64_t int64(int col) { return sqlite3_column_int64(stmt_, col); }

 private:
  sqlite3_stmt* stmt_ = nullptr;
  int rc_;
};

constexpr int kWriteBusyMs = 2000;
constexpr int kReadBusyMs = 250;

int64_t key_to_int(uint64_t k) {
  int64_t v;
  std::memcpy(&v, &k, sizeof v);
  return v;
}

std::string hint_for(int code) {
  switch (code & 0xff) {
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return "the file is corrupt or not a session store; move it away (kvgate starts a new one) or restore a backup";
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return "it is locked by another process: is another kvgate running with the same --state-dir?";
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_CANTOPEN:
      return "check that the directory exists and is writable by kvgate";
    case SQLITE_FULL:
      return "the disk is full; free space (the last answered turns are kept)";
    default:
      return "";
  }
}

}  // namespace

Result<std::unique_ptr<SessionStore>> SessionStore::open(const std::filesystem::path& path) {
  // Conversations and system prompts: owner-only directory, database, WAL and shared memory
  // (SQLite gives the WAL and -shm files the database file's mode when it creates them).
  if (!path.parent_path().empty()) KV_TRY(util::make_private_dir(path.parent_path()).with_context("session store"));
  KV_TRY(util::make_private_file(path).with_context("session store"));
  for (const char* suffix : {"-wal", "-shm", "-journal"}) {
    const std::filesystem::path side = path.string() + suffix;
    std::error_code ec;
    if (std::filesystem::exists(side, ec)) KV_TRY(util::make_private_file(side).with_context("session store"));
  }
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(util::path_utf8(path).c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                                 nullptr);
  auto fail = [&](const std::string& what, int code) -> Error {
    std::string msg = fmt::format("session store {}: {}: {}", path.string(), what, db ? sqlite3_errmsg(db) : sqlite3_errstr(code));
    if (auto hint = hint_for(code); !hint.empty()) msg += " — " + hint;
    if (db) sqlite3_close_v2(db);
    return Error(msg);
  };
  if (rc != SQLITE_OK) return fail("cannot open", rc);
  sqlite3_busy_timeout(db, 2000);
  sqlite3_extended_result_codes(db, 1);
  std::unique_ptr<SessionStore> store(new SessionStore(db, path));
  std::lock_guard lock(store->mu_);
  // Touch the file: a corrupt or foreign file fails here.
  for (const char* sql : {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL", "PRAGMA foreign_keys=ON"}) {
    char* err = nullptr;
    const int r = sqlite3_exec(db, sql, nullptr, nullptr, &err);
    sqlite3_free(err);
    if (r != SQLITE_OK) {
      store->db_ = nullptr;
      return fail(std::string("cannot use the database (") + sql + ")", r);
    }
  }
  {
    Statement check(db, "PRAGMA quick_check");
    if (!check.ok() || check.step() != SQLITE_ROW || check.text(0) != "ok") {
      store->db_ = nullptr;
      return fail("integrity check failed", SQLITE_CORRUPT);
    }
  }
  const char* schema =
      "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
      "CREATE TABLE IF NOT EXISTS sessions(id TEXT PRIMARY KEY, state TEXT NOT NULL, counters TEXT NOT NULL,"
      "  slot INTEGER NOT NULL, created INTEGER NOT NULL, last_used INTEGER NOT NULL);"
      "CREATE TABLE IF NOT EXISTS chain_keys(key INTEGER PRIMARY KEY, session_id TEXT NOT NULL"
      "  REFERENCES sessions(id) ON DELETE CASCADE);"
      "CREATE INDEX IF NOT EXISTS chain_keys_session ON chain_keys(session_id);"
      "CREATE TABLE IF NOT EXISTS compactions(session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,"
      "  ts INTEGER NOT NULL, event TEXT NOT NULL);"
      "CREATE INDEX IF NOT EXISTS compactions_session ON compactions(session_id, ts);"
      "CREATE TABLE IF NOT EXISTS responses(id TEXT PRIMARY KEY, scope TEXT NOT NULL, created INTEGER NOT NULL,"
      "  response TEXT NOT NULL, messages TEXT NOT NULL);";
  // Columns added to the responses table later (a file of an earlier kvgate has none: its
  // rows hold whole conversations and count as 0 bytes against the budgets).
  const char* added_columns[] = {"ALTER TABLE responses ADD COLUMN parent TEXT NOT NULL DEFAULT ''",
                                 "ALTER TABLE responses ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0"};
  if (auto st = store->exec(schema); !st) {
    store->db_ = nullptr;
    sqlite3_close_v2(db);
    return Error(fmt::format("session store {}: {}", path.string(), st.error().message()));
  }
  for (const char* sql : added_columns) {
    Statement has(db, "SELECT 1 FROM pragma_table_info('responses') WHERE name=?1");
    const std::string column = std::string(sql).substr(std::string_view(sql).find("COLUMN ") + 7);
    has.bind(1, column.substr(0, column.find(' ')));
    if (has.step() == SQLITE_ROW) continue;
    if (auto st = store->exec(sql); !st) {
      store->db_ = nullptr;
      sqlite3_close_v2(db);
      return Error(fmt::format("session store {}: {}", path.string(), st.error().message()));
    }
  }
  if (auto st = store->exec("CREATE INDEX IF NOT EXISTS responses_scope ON responses(scope, bytes)"); !st) {
    store->db_ = nullptr;
    sqlite3_close_v2(db);
    return Error(fmt::format("session store {}: {}", path.string(), st.error().message()));
  }
  Statement version(db, "SELECT value FROM meta WHERE key='schema_version'");
  if (version.ok() && version.step() == SQLITE_ROW) {
    const int v = std::atoi(version.text(0).c_str());
    if (v != kSessionStoreSchema) {
      store->db_ = nullptr;
      sqlite3_close_v2(db);
      return Error(fmt::format("session store {} has schema version {}, this kvgate understands {}; use the kvgate "
                               "that wrote it or move the file away",
                               path.string(), v, kSessionStoreSchema));
    }
  } else {
    Statement put(db, "INSERT INTO meta(key, value) VALUES('schema_version', ?1)");
    put.bind(1, std::to_string(kSessionStoreSchema));
    if (put.step() != SQLITE_DONE) {
      store->db_ = nullptr;
      return fail("cannot write the schema version", sqlite3_errcode(db));
    }
  }
  return store;
}

SessionStore::~SessionStore() {
  if (db_ != nullptr) sqlite3_close_v2(db_);
}

void SessionStore::busy_wait(int ms) { sqlite3_busy_timeout(db_, ms); }

Status SessionStore::exec(const char* sql) {
  char* err = nullptr;
  const int rc = sqlite3_exec(db_, sql, nullptr, nullptr, &err);
  std::string msg = err ? err : "";
  sqlite3_free(err);
  if (rc == SQLITE_OK) return {};
  std::string out = fmt::format("SQLite: {}", msg.empty() ? sqlite3_errstr(rc) : msg);
  if (auto hint = hint_for(rc); !hint.empty()) out += " — " + hint;
  return Error(out);
}

Status SessionStore::save(const StoredSession& s, const std::vector<uint64_t>& keys,
                          const std::vector<nlohmann::json>& new_compactions) {
  std::lock_guard lock(mu_);
  busy_wait(kWriteBusyMs);
  KV_TRY(exec("BEGIN IMMEDIATE").with_context("saving session " + s.id));
  auto rollback = [this](Error e) {
    (void)exec("ROLLBACK");  // best effort: the error being returned matters more
    return e;
  };
  {
    Statement up(db_,
                 "INSERT INTO sessions(id, state, counters, slot, created, last_used) VALUES(?1,?2,?3,?4,?5,?6) "
                 "ON CONFLICT(id) DO UPDATE SET state=excluded.state, counters=excluded.counters, slot=excluded.slot, "
                 "last_used=excluded.last_used");
    up.bind(1, s.id);
    up.bind(2, util::json_text(s.state));
    up.bind(3, util::json_text(s.counters));
    up.bind(4, static_cast<int64_t>(s.slot));
    up.bind(5, s.created);
    up.bind(6, s.last_used);
    if (up.step() != SQLITE_DONE) return rollback(Error(fmt::format("saving session {}: {}", s.id, sqlite3_errmsg(db_))));
  }
  {
    Statement del(db_, "DELETE FROM chain_keys WHERE session_id=?1");
    del.bind(1, s.id);
    if (del.step() != SQLITE_DONE) return rollback(Error(fmt::format("saving session {}: {}", s.id, sqlite3_errmsg(db_))));
  }
  for (uint64_t k : keys) {
    Statement ins(db_, "INSERT OR REPLACE INTO chain_keys(key, session_id) VALUES(?1, ?2)");
    ins.bind(1, key_to_int(k));
    ins.bind(2, s.id);
    if (ins.step() != SQLITE_DONE) return rollback(Error(fmt::format("saving session {}: {}", s.id, sqlite3_errmsg(db_))));
  }
  for (const auto& ev : new_compactions) {
    Statement ins(db_, "INSERT INTO compactions(session_id, ts, event) VALUES(?1, ?2, ?3)");
    ins.bind(1, s.id);
    ins.bind(2, ev.value("ts", int64_t{0}));
    ins.bind(3, util::json_text(ev));
    if (ins.step() != SQLITE_DONE) return rollback(Error(fmt::format("saving session {}: {}", s.id, sqlite3_errmsg(db_))));
  }
  if (auto st = exec("COMMIT"); !st) {
    (void)exec("ROLLBACK");  // best effort: the error being returned matters more
    return std::move(st).with_context("saving session " + s.id);
  }
  return {};
}

Result<std::optional<StoredSession>> SessionStore::load(const std::string& id) {
  std::lock_guard lock(mu_);
  busy_wait(kReadBusyMs);
  Statement q(db_, "SELECT state, counters, slot, created, last_used FROM sessions WHERE id=?1");
  q.bind(1, id);
  const int rc = q.step();
  if (rc == SQLITE_DONE) return std::optional<StoredSession>();
  if (rc != SQLITE_ROW) return Error(fmt::format("loading session {}: {}", id, sqlite3_errmsg(db_)));
  StoredSession s;
  s.id = id;
  s.state = nlohmann::json::parse(q.text(0), nullptr, false);
  s.counters = nlohmann::json::parse(q.text(1), nullptr, false);
  if (s.state.is_discarded() || s.counters.is_discarded()) {
    return Error(fmt::format("session {} in {} has unreadable state", id, path_.string()));
  }
  s.slot = static_cast<int>(q.int64(2));
  s.created = q.int64(3);
  s.last_used = q.int64(4);
  return std::optional<StoredSession>(std::move(s));
}

Result<std::optional<std::string>> SessionStore::find_by_key(uint64_t key) {
  std::lock_guard lock(mu_);
  busy_wait(kReadBusyMs);
  Statement q(db_, "SELECT session_id FROM chain_keys WHERE key=?1");
  q.bind(1, key_to_int(key));
  const int rc = q.step();
  if (rc == SQLITE_DONE) return std::optional<std::string>();
  if (rc != SQLITE_ROW) return Error(fmt::format("session lookup: {}", sqlite3_errmsg(db_)));
  return std::optional<std::string>(q.text(0));
}

Result<std::vector<nlohmann::json>> SessionStore::compactions(const std::string& id, int limit) {
  std::lock_guard lock(mu_);
  Statement q(db_, "SELECT event FROM compactions WHERE session_id=?1 ORDER BY rowid DESC LIMIT ?2");
  q.bind(1, id);
  q.bind(2, static_cast<int64_t>(limit));
  std::vector<nlohmann::json> out;
  int rc;
  while ((rc = q.step()) == SQLITE_ROW) {
    auto j = nlohmann::json::parse(q.text(0), nullptr, false);
    if (!j.is_discarded()) out.push_back(std::move(j));
  }
  if (rc != SQLITE_DONE) return Error(fmt::format("compaction history: {}", sqlite3_errmsg(db_)));
  std::reverse(out.begin(), out.end());
  return out;
}

Status SessionStore::remove(const std::string& id) {
  std::lock_guard lock(mu_);
  Statement q(db_, "DELETE FROM sessions WHERE id=?1");
  q.bind(1, id);
  if (q.step() != SQLITE_DONE) return Error(fmt::format("removing session {}: {}", id, sqlite3_errmsg(db_)));
  return {};
}

Status SessionStore::save_response(const std::string& id, const StoredResponse& r, const ResponseBudget& budget) {
  std::lock_guard lock(mu_);
  busy_wait(kWriteBusyMs);
  Statement q(db_,
              "INSERT OR REPLACE INTO responses(id, scope, created, response, messages, parent, bytes) "
              "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)");
  q.bind(1, id);
  q.bind(2, r.scope);
  q.bind(3, r.created);
  q.bind(4, r.response);
  q.bind(5, r.messages);
  q.bind(6, r.parent);
  q.bind(7, static_cast<int64_t>(r.bytes()));
  if (q.step() != SQLITE_DONE) return Error(fmt::format("saving response {}: {}", id, sqlite3_errmsg(db_)));
  // The oldest beyond the budget go (rowids grow with each insert).
  auto prune = [&](const char* sql, int64_t bound, bool scoped) -> Status {
    if (bound <= 0) return {};
    Statement p(db_, sql);
    p.bind(1, bound);
    if (scoped) p.bind(2, r.scope);
    if (p.step() != SQLITE_DONE) return Error(fmt::format("pruning responses: {}", sqlite3_errmsg(db_)));
    return {};
  };
  KV_TRY(prune("DELETE FROM responses WHERE rowid <= (SELECT MAX(rowid) FROM responses) - ?1", budget.keep, false));
  KV_TRY(prune("DELETE FROM responses WHERE rowid IN (SELECT rowid FROM (SELECT rowid, SUM(bytes) OVER (ORDER BY "
               "rowid DESC) AS newer FROM responses WHERE scope=?2) WHERE newer > ?1)",
               budget.scope_bytes, true));
  return prune("DELETE FROM responses WHERE rowid IN (SELECT rowid FROM (SELECT rowid, SUM(bytes) OVER (ORDER BY "
               "rowid DESC) AS newer FROM responses) WHERE newer > ?1)",
               budget.total_bytes, false);
}

Result<std::optional<StoredResponse>> SessionStore::load_response(const std::string& id) {
  std::lock_guard lock(mu_);
  busy_wait(kReadBusyMs);
  Statement q(db_, "SELECT scope, created, response, messages, parent FROM responses WHERE id=?1");
  q.bind(1, id);
  const int rc = q.step();
  if (rc == SQLITE_DONE) return std::optional<StoredResponse>();
  if (rc != SQLITE_ROW) return Error(fmt::format("response lookup: {}", sqlite3_errmsg(db_)));
  return std::optional<StoredResponse>(StoredResponse{.scope = q.text(0), .created = q.int64(1), .response = q.text(2),
                                                      .messages = q.text(3), .parent = q.text(4)});
}

Result<uint64_t> SessionStore::prune(int64_t used_before, int64_t keep_newest) {
  std::lock_guard lock(mu_);
  busy_wait(kWriteBusyMs);
  if (auto begun = exec("BEGIN IMMEDIATE"); !begun) return Error("pruning sessions: " + begun.error().message());
  uint64_t removed = 0;
  auto run = [&](const char* sql, int64_t v, bool sessions) {
    Statement q(db_, sql);
    q.bind(1, v);
    if (q.step() != SQLITE_DONE) return false;
    if (sessions) removed += static_cast<uint64_t>(sqlite3_changes(db_));
    return true;
  };
  bool ok = true;
  if (used_before > 0) {
    ok = run("DELETE FROM sessions WHERE last_used < ?1", used_before, true) &&
         run("DELETE FROM responses WHERE created < ?1", used_before, false);
  }
  if (ok && keep_newest > 0) {
    ok = run("DELETE FROM sessions WHERE id IN (SELECT id FROM sessions ORDER BY last_used DESC, rowid DESC "
             "LIMIT -1 OFFSET ?1)",
             keep_newest, true);
  }
  if (!ok) {
    const std::string why = sqlite3_errmsg(db_);
    (void)exec("ROLLBACK");
    return Error("pruning sessions: " + why);
  }
  if (auto done = exec("COMMIT"); !done) return Error("pruning sessions: " + done.error().message());
  return removed;
}

Result<uint64_t> SessionStore::count() {
  std::lock_guard lock(mu_);
  Statement q(db_, "SELECT COUNT(*) FROM sessions");
  if (q.step() != SQLITE_ROW) return Error(fmt::format("counting sessions: {}", sqlite3_errmsg(db_)));
  return static_cast<uint64_t>(q.int64(0));
}

}  // namespace kvgate::session
