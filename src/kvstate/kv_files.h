// The saved engine states of conversations, on disk: one state file per session, written by
// the engine (`POST /slots/N?action=save` into its --slot-save-path, which is this folder),
// and beside it a record of what the file holds and under which engine it was made.
//
// A state file is only ever handed back to an engine when
//   - its record says it was saved under the same identity (model file, engine build, cache
//     types, context per slot, ...: an opaque JSON object the caller builds), and
//   - the file is intact: its size and XXH3 hash are those recorded when it was saved (the
//     engine aborts on a truncated file instead of refusing it).
// A file that fails the second check is deleted, with a log line. Files of another identity
// are kept (they are the right ones again when the settings are changed back) but never
// restored; all files count against the disk budget, the least recently used go first.
//
// Writes are atomic: the engine writes a temporary name, commit() checks it, records it and
// renames it over the session's file; the record is replaced with a temporary + rename too.
// Everything here is readable by its owner only (the state holds the conversation's tokens).
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/result.h"

namespace kvgate::gateway {

struct KvFileRecord {
  std::string session;
  uint64_t tokens = 0;           // tokens the state holds (the engine's n_saved)
  uint64_t prefix_messages = 0;  // the state begins with the rendering of this many view messages,
  uint64_t prefix_hash = 0;      // whose view_prefix_hash() this is
  uint64_t bytes = 0;            // of the state file
  uint64_t file_hash = 0;        // XXH3-64 of the state file
  nlohmann::json identity;       // what it was saved under
  int64_t saved_at_ms = 0;       // unix ms
  int64_t used_at_ms = 0;        // last save or restore, unix ms (least recently used goes first)
  double save_ms = 0;            // the save's duration as kvgate saw it
  std::string scope;             // the key scope of the session that saved it ("": unknown)

  nlohmann::json to_json() const;
  static Result<KvFileRecord> from_json(const nlohmann::json& j);
};

class KvFiles {
 public:
  // Opens (creating, mode 0700) `dir` and reads the records there: records without their
  // state file, state files without a record and left-over temporaries are deleted.
  // `budget_bytes` > 0.
  static Result<std::unique_ptr<KvFiles>> open(const std::filesystem::path& dir, uint64_t budget_bytes,
                                               nlohmann::json identity);

  // A fresh temporary name (inside the folder, as the engine's `filename`) for a save of `session`.
  std::string temp_name(const std::string& session);
  // The engine wrote `temp`: measures and hashes it, fills `rec.bytes`/`file_hash`/`identity`/
  // times, makes it the session's state file and evicts beyond the budget. The file is
  // deleted on any failure (also when it alone is larger than the budget).
  Result<KvFileRecord> commit(const std::string& temp, KvFileRecord rec);
  // Deletes a temporary the engine may have left behind.
  void discard_temp(const std::string& temp);
  // The session's state file, when saved under this identity and intact (checked now: size
  // and hash); an intact-looking record whose file is not is deleted. nullopt otherwise.
  std::optional<KvFileRecord> find(const std::string& session);
  // The record of the session's file whatever its identity (for status), nullopt if none.
  std::optional<KvFileRecord> record(const std::string& session);
  // The engine's `filename` of the session's state file.
  std::string file_name(const std::string& session) const;
  // Marks the session's file as used now (LRU).
  void touch(const std::string& session);
  void remove(const std::string& session);

  // The records in another engine's folder of the same plan (kvgate up --engines), read from
  // its disk now; unreadable ones are skipped.
  static std::vector<KvFileRecord> records_in(const std::filesystem::path& dir);
  // Takes the state file of `theirs` (a record of records_in(from)) as `session`'s: linked or
  // copied in, checked against the size and hash `theirs` recorded, recorded here. Errors:
  // another identity, a file that is gone or not what was saved.
  Result<KvFileRecord> adopt(const std::filesystem::path& from, const KvFileRecord& theirs,
                             const std::string& session);

  uint64_t total_bytes();
  size_t count();
  uint64_t budget_bytes() const { return budget_; }
  uint64_t evictions();
  const std::filesystem::path& dir() const { return dir_; }

 private:
  KvFiles(std::filesystem::path dir, uint64_t budget, nlohmann::json identity)
      : dir_(std::move(dir)), budget_(budget), identity_(std::move(identity)) {}
  void load();
  void remove_locked(const std::string& session);  // REQUIRES: mu_ held
  void evict_locked(const std::string& keep);      // REQUIRES: mu_ held
  Status write_record(const KvFileRecord& rec);
  std::filesystem::path state_path(const std::string& session) const { return dir_ / file_name(session); }
  std::filesystem::path record_path(const std::string& session) const;

  const std::filesystem::path dir_;
  const uint64_t budget_;
  const nlohmann::json identity_;
  std::mutex mu_;
  std::map<std::string, KvFileRecord> records_;  // by session; guarded by mu_
  uint64_t total_ = 0;                           // guarded by mu_
  uint64_t evictions_ = 0;                       // guarded by mu_
  uint64_t temp_serial_ = 0;                     // guarded by mu_
};

// XXH3-64 of a file's bytes.
Result<uint64_t> hash_file(const std::filesystem::path& path);

}  // namespace kvgate::gateway
