// FatalRequests: the requests that were with the engine when it was lost (it died, or hung and
// the supervisor killed it), so that one that takes the engine down is not sent to it again.
//
// A request is known by a digest of its body as the client sent it. While a request is with
// the engine it holds an InFlight token. When the engine is lost (engine_lost(), on every
// new engine generation) each request in flight gets a strike; a request that was alone with
// an engine that hung (the supervisor killed it as a zombie: it stopped answering its probes)
// gets two, since nothing else was asking the engine for work. Two strikes make it fatal:
// kvgate sends it no more (no automatic re-send on the restarted engine), and an identical
// request is refused before it reaches the engine. So a request that freezes the engine costs
// one restart when it was alone, and at most two otherwise; a request with an engine that
// died (crashed, or killed from outside) is re-sent once, as before, and is fatal only when
// the engine dies with it again.
// The newest `capacity` digests are remembered (in memory only).
//
// Thread-safety: all methods may be called concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string_view>
#include <unordered_map>

#include "gateway/api_error.h"

namespace kvgate::gateway {

// The answer to a request that was fatal to the engine: a 502 for the one that was with it,
// a 400 for an identical one sent later (`resent`).
ApiError fatal_request_error(bool resent);

class FatalRequests {
 public:
  explicit FatalRequests(size_t capacity = 1024) : capacity_(capacity) {}

  static uint64_t digest(std::string_view body_text);

  class InFlight {
   public:
    InFlight() = default;
    InFlight(FatalRequests* owner, uint64_t digest) : owner_(owner), digest_(digest) {}
    InFlight(InFlight&& o) noexcept : owner_(o.owner_), digest_(o.digest_) { o.owner_ = nullptr; }
    InFlight& operator=(InFlight&& o) noexcept;
    InFlight(const InFlight&) = delete;
    InFlight& operator=(const InFlight&) = delete;
    ~InFlight() { release(); }
    void release();

   private:
    FatalRequests* owner_ = nullptr;
    uint64_t digest_ = 0;
  };

  // Marks `digest` as with the engine until the token is released or destroyed.
  InFlight enter(uint64_t digest);
  // The engine was lost (`hung`: killed for not answering): strikes for every request in
  // flight. Returns how many became fatal.
  size_t engine_lost(bool hung);
  bool fatal(uint64_t digest) const;

 private:
  void leave(uint64_t digest);

  const size_t capacity_;
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, int> in_flight_;  // digest → holders; guarded by mu_
  std::unordered_map<uint64_t, int> strikes_;    // guarded by mu_
  std::deque<uint64_t> order_;                   // of strikes_' keys, oldest first; guarded by mu_
};

}  // namespace kvgate::gateway
