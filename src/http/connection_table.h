// ConnectionTable: which connections HttpServer holds and which one gives way when a new one
// arrives at a full server. BodyBudget: the request-body bytes held across all connections.
//
// Two pools share `max_connections`:
//  - unauthenticated: a connection that has not yet presented a valid key, or whose last
//    request did not (a 401, or a public route without a key). At most `max_unauthenticated`;
//  - authenticated: its last request carried a valid key (every request, when none is set).
// A new connection starts unauthenticated. When a pool is full, a connection is closed to
// admit the new one instead of refusing it: first the one idle longest between requests
// (keep-alive), then (unauthenticated only) the one that has waited longest for its request
// head. A connection that is working on a request is never closed for another; when every
// candidate is working, the new connection is refused (the server answers 503).
//
// `scarce()` tells connection threads that slots are short (at least 3/4 of
// `max_connections` open), so idle keep-alive connections wait less before closing.
//
// Thread-safety: all members are thread-safe (one internal mutex). `on_evict` is called
// with that mutex held, before the victim's thread can remove its entry, so the fd it is
// given is still open (a connection thread must call remove() before closing its fd).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <unordered_map>

namespace kvgate::http {

struct ConnectionLimits {
  size_t max_connections = 256;
  size_t max_unauthenticated = 64;  // REQUIRES: <= max_connections
};

class ConnectionTable {
 public:
  using Id = uint64_t;
  enum class Phase {
    kHead,     // waiting for or reading a request head (a new connection starts here)
    kIdle,     // keep-alive: between requests, waiting for the next one's first byte
    kWorking,  // a request's head arrived: its body, the handler, its answer
  };
  ConnectionTable(ConnectionLimits limits, std::function<void(int fd)> on_evict);

  // Admits a new connection (unauthenticated, kHead), closing another if a pool is full.
  // nullopt: refused (every candidate is working).
  std::optional<Id> admit(int fd);
  void set_phase(Id id, Phase phase);
  // Moves the connection to the pool its last request belongs to. Returns false when it
  // cannot stay open after this request (the unauthenticated pool is full): answer, then close.
  bool set_authenticated(Id id, bool authenticated);
  // Whether the connection was closed to admit another (its thread should stop).
  bool evicted(Id id) const;
  void remove(Id id);

  size_t open() const;             // connections counted (evicted ones are not)
  size_t unauthenticated() const;  // of open()
  size_t in_phase(Phase phase) const;  // of open()
  bool scarce() const;
  uint64_t evictions() const { return evictions_.load(); }

 private:
  struct Entry {
    int fd;
    Phase phase = Phase::kHead;
    bool authenticated = false;
    bool evicted = false;
    uint64_t since = 0;  // order of the last phase change (smaller: longer ago)
  };
  // The connection to close for a newcomer; `unauthenticated_only` when that pool is full.
  Entry* victim(bool unauthenticated_only);
  void evict(Entry& e);

  const ConnectionLimits limits_;
  const std::function<void(int)> on_evict_;
  mutable std::mutex mu_;
  std::unordered_map<Id, Entry> entries_;  // guarded by mu_
  Id next_id_ = 1;                         // guarded by mu_
  uint64_t tick_ = 0;                      // guarded by mu_
  size_t open_ = 0;                        // guarded by mu_: entries not evicted
  size_t unauthenticated_ = 0;             // guarded by mu_: of open_
  std::atomic<uint64_t> evictions_{0};
};

// Bytes of request bodies held in memory across all connections, against one limit.
// Thread-safe (an atomic).
class BodyBudget {
 public:
  explicit BodyBudget(uint64_t limit) : limit_(limit) {}
  // Takes `bytes` from the budget; false (nothing taken) if that would exceed the limit.
  bool take(uint64_t bytes);
  void give_back(uint64_t bytes);
  uint64_t in_use() const { return in_use_.load(); }
  uint64_t limit() const { return limit_; }

 private:
  const uint64_t limit_;
  std::atomic<uint64_t> in_use_{0};
};

}  // namespace kvgate::http
