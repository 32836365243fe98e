#include "kvstate/kv_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <system_error>
#include <vector>

#include <fmt/format.h>
#include <xxhash.h>

#include "util/json.h"
#include "util/log.h"
#include "util/mapped_file.h"
#include "util/private_files.h"

namespace kvgate::gateway {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr std::string_view kStateSuffix = ".state";
constexpr std::string_view kRecordSuffix = ".json";
constexpr std::string_view kTempPrefix = "tmp-";

int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

void remove_quietly(const fs::path& p) {
  std::error_code ec;
  fs::remove(p, ec);
}

void log_deleted(const std::string& file, const std::string& why) {
  util::log_event(util::LogLevel::kWarn, "kv_state_deleted", {{"file", file}, {"reason", why}});
}

}  // namespace

json KvFileRecord::to_json() const {
  return {{"session", session},
          {"tokens", tokens},
          {"prefix_messages", prefix_messages},
          {"prefix_hash", fmt::format("{:016x}", prefix_hash)},
          {"bytes", bytes},
          {"file_hash", fmt::format("{:016x}", file_hash)},
          {"identity", identity},
          {"saved_at_ms", saved_at_ms},
          {"used_at_ms", used_at_ms},
          {"save_ms", save_ms},
          {"scope", scope}};
}

Result<KvFileRecord> KvFileRecord::from_json(const json& j) {
  try {
    KvFileRecord r;
    r.session = j.at("session").get<std::string>();
    r.tokens = j.at("tokens").get<uint64_t>();
    r.prefix_messages = j.at("prefix_messages").get<uint64_t>();
    r.prefix_hash = std::stoull(j.at("prefix_hash").get<std::string>(), nullptr, 16);
    r.bytes = j.at("bytes").get<uint64_t>();
    r.file_hash = std::stoull(j.at("file_hash").get<std::string>(), nullptr, 16);
    r.identity = j.at("identity");
    r.saved_at_ms = j.at("saved_at_ms").get<int64_t>();
    r.used_at_ms = j.at("used_at_ms").get<int64_t>();
    r.save_ms = j.value("save_ms", 0.0);
    r.scope = j.value("scope", std::string());
    if (r.session.empty()) return Error("empty session id");
    return r;
  } catch (const std::exception& e) {
    return Error(std::string("malformed state record: ") + e.what());
  }
}

namespace {

Result<KvFileRecord> read_record(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  json j = json::parse(text.str(), nullptr, false);
  return j.is_discarded() ? Result<KvFileRecord>(Error("not JSON")) : KvFileRecord::from_json(j);
}

}  // namespace

Result<uint64_t> hash_file(const fs::path& path) {
  KV_ASSIGN_OR_RETURN(util::MappedFile m, util::MappedFile::open(path));
  return static_cast<uint64_t>(XXH3_64bits(m.bytes().data(), m.size()));
}

Result<std::unique_ptr<KvFiles>> KvFiles::open(const fs::path& dir, uint64_t budget_bytes, json identity) {
  if (budget_bytes == 0) return Error("the disk budget for saved states is 0 (saving is off)");
  KV_TRY(util::make_private_dir(dir));
  std::unique_ptr<KvFiles> files(new KvFiles(dir, budget_bytes, std::move(identity)));
  files->load();
  std::lock_guard lock(files->mu_);
  files->evict_locked("");
  return files;
}

std::string KvFiles::file_name(const std::string& session) const {
  return fmt::format("kv-{:016x}{}", XXH3_64bits(session.data(), session.size()), kStateSuffix);
}

fs::path KvFiles::record_path(const std::string& session) const {
  fs::path p = state_path(session);
  p.replace_extension(kRecordSuffix);
  return p;
}

std::vector<KvFileRecord> KvFiles::records_in(const fs::path& dir) {
  std::vector<KvFileRecord> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with(kTempPrefix) || !ends_with(name, kRecordSuffix)) continue;
    if (auto rec = read_record(entry.path()); rec.ok()) out.push_back(std::move(*rec));
  }
  return out;
}

Result<KvFileRecord> KvFiles::adopt(const fs::path& from, const KvFileRecord& theirs,
                                    const std::string& session) {
  if (theirs.identity != identity_) return Error("it was saved under another identity");
  const std::string temp = temp_name(session);
  const fs::path source = from / file_name(theirs.session);
  std::error_code ec;
  fs::create_hard_link(source, dir_ / temp, ec);  // the other engine replaces its file by rename
  if (ec) {
    ec.clear();
    fs::copy_file(source, dir_ / temp, ec);
  }
  if (ec) {
    discard_temp(temp);
    return Error(fmt::format("cannot take {}: {}", source.string(), ec.message()));
  }
  KvFileRecord mine = theirs;
  mine.session = session;
  KV_ASSIGN_OR_RETURN(KvFileRecord committed, commit(temp, std::move(mine)));
  if (committed.bytes != theirs.bytes || committed.file_hash != theirs.file_hash) {
    remove(session);
    return Error(fmt::format("{} is not what was saved there", source.string()));
  }
  return committed;
}

void KvFiles::load() {
  std::error_code ec;
  std::vector<fs::path> states;
  std::vector<fs::path> records;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with(kTempPrefix)) {
      remove_quietly(entry.path());  // a save that never completed
    } else if (ends_with(name, kStateSuffix)) {
      states.push_back(entry.path());
    } else if (ends_with(name, kRecordSuffix)) {
      records.push_back(entry.path());
    }
  }
  std::lock_guard lock(mu_);
  for (const auto& path : records) {
    auto rec = read_record(path);
    const fs::path state = rec.ok() ? state_path(rec->session) : fs::path();
    if (!rec.ok() || record_path(rec->session) != path || !fs::exists(state)) {
      log_deleted(path.filename().string(), rec.ok() ? "its state file is missing" : rec.error().message());
      remove_quietly(path);
      continue;
    }
    total_ += rec->bytes;
    records_[rec->session] = std::move(*rec);
  }
  for (const auto& path : states) {
    bool known = false;
    for (const auto& [session, rec] : records_) known = known || state_path(session) == path;
    if (!known) {
      log_deleted(path.filename().string(), "no record says what it holds");
      remove_quietly(path);
    }
  }
}

std::string KvFiles::temp_name(const std::string& session) {
  std::lock_guard lock(mu_);
  return fmt::format("{}{}-{}-{}", kTempPrefix, ::getpid(), ++temp_serial_, file_name(session));
}

void KvFiles::discard_temp(const std::string& temp) {
  if (temp.starts_with(kTempPrefix) && temp.find('/') == std::string::npos) remove_quietly(dir_ / temp);
}

Status KvFiles::write_record(const KvFileRecord& rec) {
  return util::write_private_file(record_path(rec.session), util::json_text(rec.to_json(), 1));
}

Result<KvFileRecord> KvFiles::commit(const std::string& temp, KvFileRecord rec) {
  const fs::path tmp = dir_ / temp;
  auto fail = [&](const std::string& why) -> Result<KvFileRecord> {
    discard_temp(temp);
    return Error(why);
  };
  std::error_code ec;
  const uint64_t size = fs::file_size(tmp, ec);
  if (ec) return fail(fmt::format("the engine's state file {} cannot be read: {}", temp, ec.message()));
  if (size > budget_) {
    return fail(fmt::format("a state of {} bytes is larger than the whole disk budget ({} bytes)", size, budget_));
  }
  // The engine creates it with its umask; it holds the conversation.
  static_cast<void>(util::make_private_file(tmp));
  auto hash = hash_file(tmp);
  if (!hash.ok()) return fail(hash.error().message());
  rec.bytes = size;
  rec.file_hash = *hash;
  rec.identity = identity_;
  rec.saved_at_ms = rec.used_at_ms = unix_ms();
  std::lock_guard lock(mu_);
  // The record goes first: a crash between the two renames leaves a record whose hash the
  // old file does not have, and the file is then deleted instead of restored.
  if (auto s = write_record(rec); !s.ok()) return fail(s.error().message());
  fs::rename(tmp, state_path(rec.session), ec);
  if (ec) {
    remove_locked(rec.session);
    return fail(fmt::format("cannot rename {}: {}", temp, ec.message()));
  }
  if (auto it = records_.find(rec.session); it != records_.end()) total_ -= it->second.bytes;
  records_[rec.session] = rec;
  total_ += rec.bytes;
  evict_locked(rec.session);
  return rec;
}

std::optional<KvFileRecord> KvFiles::find(const std::string& session) {
  std::lock_guard lock(mu_);
  auto it = records_.find(session);
  if (it == records_.end() || it->second.identity != identity_) return std::nullopt;
  const fs::path path = state_path(session);
  std::error_code ec;
  const uint64_t size = fs::file_size(path, ec);
  std::string why;
  if (ec) {
    why = "it cannot be read: " + ec.message();
  } else if (size != it->second.bytes) {
    why = fmt::format("it has {} bytes, {} were saved", size, it->second.bytes);
  } else if (auto h = hash_file(path); !h.ok() || *h != it->second.file_hash) {
    why = h.ok() ? "its content is not what was saved (hash)" : h.error().message();
  }
  if (!why.empty()) {
    log_deleted(path.filename().string(), why);
    remove_locked(session);
    return std::nullopt;
  }
  return it->second;
}

std::optional<KvFileRecord> KvFiles::record(const std::string& session) {
  std::lock_guard lock(mu_);
  auto it = records_.find(session);
  if (it == records_.end()) return std::nullopt;
  return it->second;
}

void KvFiles::touch(const std::string& session) {
  std::lock_guard lock(mu_);
  auto it = records_.find(session);
  if (it == records_.end()) return;
  it->second.used_at_ms = unix_ms();
  (void)write_record(it->second);  // only the eviction order depends on it
}

void KvFiles::remove(const std::string& session) {
  std::lock_guard lock(mu_);
  remove_locked(session);
}

void KvFiles::remove_locked(const std::string& session) {
  remove_quietly(state_path(session));
  remove_quietly(record_path(session));
  if (auto it = records_.find(session); it != records_.end()) {
    total_ -= it->second.bytes;
    records_.erase(it);
  }
}

void KvFiles::evict_locked(const std::string& keep) {
  while (total_ > budget_) {
    auto victim = records_.end();
    for (auto it = records_.begin(); it != records_.end(); ++it) {
      if (it->first == keep) continue;
      if (victim == records_.end() || it->second.used_at_ms < victim->second.used_at_ms) victim = it;
    }
    if (victim == records_.end()) break;
    util::log_event(util::LogLevel::kInfo, "kv_state_evicted",
                    {{"session", victim->first}, {"bytes", victim->second.bytes}, {"budget_bytes", budget_}});
    ++evictions_;
    remove_locked(std::string(victim->first));
  }
}

uint64_t KvFiles::total_bytes() {
  std::lock_guard lock(mu_);
  return total_;
}

size_t KvFiles::count() {
  std::lock_guard lock(mu_);
  return records_.size();
}

uint64_t KvFiles::evictions() {
  std::lock_guard lock(mu_);
  return evictions_;
}

}  // namespace kvgate::gateway
