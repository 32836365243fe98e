#include "http/connection_table.h"

namespace kvgate::http {

ConnectionTable::ConnectionTable(ConnectionLimits limits, std::function<void(int fd)> on_evict)
    : limits_(limits), on_evict_(std::move(on_evict)) {}

ConnectionTable::Entry* ConnectionTable::victim(bool unauthenticated_only) {
  Entry* idle = nullptr;
  Entry* waiting = nullptr;
  for (auto& [id, e] : entries_) {
    if (e.evicted || e.phase == Phase::kWorking) continue;
    if (unauthenticated_only && e.authenticated) continue;
    if (e.phase == Phase::kIdle) {
      if (!idle || e.since < idle->since) idle = &e;
    } else if (!e.authenticated) {  // an authenticated client's next head is not cut off
      if (!waiting || e.since < waiting->since) waiting = &e;
    }
  }
  return idle ? idle : waiting;
}

void ConnectionTable::evict(Entry& e) {
  e.evicted = true;
  --open_;
  if (!e.authenticated) --unauthenticated_;
  ++evictions_;
  if (on_evict_) on_evict_(e.fd);
}

std::optional<ConnectionTable::Id> ConnectionTable::admit(int fd) {
  std::lock_guard lock(mu_);
  if (unauthenticated_ >= limits_.max_unauthenticated) {
    Entry* v = victim(true);
    if (!v) return std::nullopt;
    evict(*v);
  }
  if (open_ >= limits_.max_connections) {
    Entry* v = victim(false);
    if (!v) return std::nullopt;
    evict(*v);
  }
  const Id id = next_id_++;
  entries_.emplace(id, Entry{.fd = fd, .since = tick_++});
  ++open_;
  ++unauthenticated_;
  return id;
}

void ConnectionTable::set_phase(Id id, Phase phase) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  it->second.phase = phase;
  it->second.since = tick_++;
}

bool ConnectionTable::set_authenticated(Id id, bool authenticated) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return false;
  Entry& e = it->second;
  if (e.evicted) return false;
  if (e.authenticated == authenticated) return true;
  e.authenticated = authenticated;
  if (authenticated) {
    --unauthenticated_;
    return true;
  }
  ++unauthenticated_;
  return unauthenticated_ <= limits_.max_unauthenticated;
}

bool ConnectionTable::evicted(Id id) const {
  std::lock_guard lock(mu_);
  auto it = entries_.find(id);
  return it == entries_.end() || it->second.evicted;
}

void ConnectionTable::remove(Id id) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  if (!it->second.evicted) {
    --open_;
    if (!it->second.authenticated) --unauthenticated_;
  }
  entries_.erase(it);
}

size_t ConnectionTable::open() const {
  std::lock_guard lock(mu_);
  return open_;
}

size_t ConnectionTable::unauthenticated() const {
  std::lock_guard lock(mu_);
  return unauthenticated_;
}

size_t ConnectionTable::in_phase(Phase phase) const {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const auto& [id, e] : entries_) n += (!e.evicted && e.phase == phase) ? 1 : 0;
  return n;
}

bool ConnectionTable::scarce() const {
  std::lock_guard lock(mu_);
  return open_ * 4 >= limits_.max_connections * 3;
}

bool BodyBudget::take(uint64_t bytes) {
  uint64_t cur = in_use_.load();
  for (;;) {
    if (bytes > limit_ || cur > limit_ - bytes) return false;
    if (in_use_.compare_exchange_weak(cur, cur + bytes)) return true;
  }
}

void BodyBudget::give_back(uint64_t bytes) { in_use_.fetch_sub(bytes); }

}  // namespace kvgate::http
