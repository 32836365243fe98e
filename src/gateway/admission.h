// Admission: how many requests work with the engine at once, and how many may wait.
//
// Without a bound, requests beyond the engine's capacity pile up (in kvgate's threads and in
// the engine's own unbounded queue) until clients time out. Admission keeps three bounds:
//
//   max_active               requests working with the engine at once (chat turns, raw
//                            completions, manual compactions);
//   max_waiting              requests waiting for a place, all keys together; one more is
//                            refused at once (429 queue_full);
//   max_waiting_per_key      requests of one key (a session) waiting; one more is refused at
//                            once, so one client flooding its conversation cannot fill the
//                            queue for everyone else;
//   max_wait                 a request that waited this long is refused (429 queue_timeout).
//
// Refusals carry a Retry-After estimate: the mean time a place was held × the requests ahead
// ÷ max_active (1 s to 60 s).
//
// Order (fair queuing): a key (a session) has at most one request admitted at a time, and its
// requests are admitted in their arrival order (per-session order). When a place frees, it
// goes to the waiting session that was served least recently (a session never served, or
// not served since it was last idle, first; ties by arrival): sessions take turns, a session
// with many requests waiting cannot starve the others, and a waiter whose session is busy
// never blocks the waiters behind it.
//
// Thread-safety: all methods are thread-safe (one mutex, one condition variable). A Ticket
// releases its place when destroyed; it must not outlive the Admission.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <mutex>
#include <string>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "util/result.h"

namespace kvgate::gateway {

struct AdmissionOptions {
  size_t max_active = 1;
  size_t max_waiting = 64;
  size_t max_waiting_per_key = 8;
  std::chrono::milliseconds max_wait{120000};
};

class Admission {
 public:
  explicit Admission(AdmissionOptions options);
  Admission(const Admission&) = delete;
  Admission& operator=(const Admission&) = delete;

  // A place with the engine; released when destroyed (or by release()).
  class Ticket {
   public:
    Ticket() = default;
    Ticket(Ticket&& other) noexcept;
    Ticket& operator=(Ticket&& other) noexcept;
    ~Ticket() { release(); }
    void release();
    bool held() const { return owner_ != nullptr; }
    // How long the request waited for its place.
    std::chrono::milliseconds waited() const { return waited_; }

   private:
    friend class Admission;
    Admission* owner_ = nullptr;
    std::string key_;
    std::chrono::steady_clock::time_point since_{};
    std::chrono::milliseconds waited_{0};
  };

  struct Refusal {
    enum class Reason { kQueueFull, kKeyQueueFull, kTimeout, kClientGone };
    Reason reason = Reason::kQueueFull;
    int retry_after_s = 1;
    std::string message;
    const char* code() const;  // "queue_full", "session_queue_full", "queue_timeout", "client_gone"
  };

  // Waits for a place for `key` (a session id; use a unique key for requests without one).
  // `client_gone` is polled while waiting (every 100 ms); a gone client gives kClientGone.
  Result<Ticket, Refusal> enter(const std::string& key, const std::function<bool()>& client_gone = nullptr);

  struct Stats {
    size_t active = 0;
    size_t waiting = 0;
    uint64_t admitted = 0;
    uint64_t refused_queue_full = 0;
    uint64_t refused_timeout = 0;
    uint64_t client_gone = 0;
    double max_wait_ms = 0;   // longest wait of an admitted request
    double mean_hold_ms = 0;  // moving average of how long a place is held
  };
  Stats stats() const;
  nlohmann::json to_json() const;
  const AdmissionOptions& options() const { return options_; }

 private:
  struct Waiter {
    std::string key;
  };
  void leave(const std::string& key, std::chrono::steady_clock::time_point since);
  void forget_if_idle(const std::string& key);  // REQUIRES: mu_ held
  // REQUIRES: mu_ held. Whether `w` is the waiter to admit next.
  bool eligible(const Waiter* w) const;
  int retry_after_locked(size_t ahead) const;  // REQUIRES: mu_ held

  const AdmissionOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::list<Waiter*> queue_;                               // guarded by mu_; arrival order
  std::unordered_map<std::string, size_t> busy_;           // guarded by mu_; key → admitted requests
  std::unordered_map<std::string, size_t> queued_;         // guarded by mu_; key → waiting requests
  std::unordered_map<std::string, uint64_t> last_served_;  // guarded by mu_; keys busy or queued
  uint64_t serial_ = 0;                                    // guarded by mu_; admissions so far
  size_t active_ = 0;                                      // guarded by mu_
  Stats stats_;                                            // guarded by mu_ (counters only)
};

}  // namespace kvgate::gateway
