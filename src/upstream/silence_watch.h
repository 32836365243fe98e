// SilenceWatch: while an engine's stream is silent, tells an engine that is working from one
// that is stuck.
//
// An engine can be silent and busy: mainline's tool-call parser holds back what may be a call
// while its slot goes on decoding (a Responses request with tools and no output limit went
// quiet after 67 deltas while /slots showed n_decoded 393 → 428 in 5 s). A time-out on the
// silence alone ends such a reply with a 504. So once the stream has been silent for `poll`,
// the engine's slot is read (GET /slots, the entry with the request's id_slot) every `poll`:
// while its decoded tokens or its processed prompt grow, the engine is working — the wait
// goes on and `on_progress` hears what it does (the adapter's keep-alives carry it). When
// neither data nor slot progress came for `timeout`, the engine is stuck: the attempt is
// cancelled and stuck() says so (the turn then answers 504 as for any time-out). An engine
// without /slots (or one that does not answer it) is judged by its silence alone.
//
// It also forwards the turn's cancellation (the client left) to the attempt within `tick`.
//
// Thread-safety: heard() may be called from any thread (the stream's reader); the rest from
// the thread that owns the watch. Destroying it stops its thread at once.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "upstream/upstream.h"

namespace kvgate::gateway {

// The work a slot has done on its current request (prompt tokens processed + tokens decoded)
// from an engine's /slots answer; nullopt when the slot is not listed or has no counts.
std::optional<uint64_t> slot_work(const nlohmann::json& slots, int slot);

struct SilenceWatchOptions {
  std::chrono::milliseconds timeout{300000};  // silence without progress that means stuck
  std::chrono::milliseconds poll{10000};      // how often a silent engine's slot is read
  std::chrono::milliseconds tick{100};        // how soon a cancelled turn cancels the attempt
};

class SilenceWatch {
 public:
  SilenceWatch(Upstream& upstream, int slot, CancelScope& turn, CancelScope& attempt,
               SilenceWatchOptions options, std::function<void(std::string)> on_progress);
  ~SilenceWatch();
  SilenceWatch(const SilenceWatch&) = delete;
  SilenceWatch& operator=(const SilenceWatch&) = delete;

  void heard();  // the engine sent something
  bool stuck() const { return stuck_.load(); }
  uint64_t polls() const { return polls_.load(); }  // slot reads made while silent

 private:
  using Clock = std::chrono::steady_clock;
  void run();
  bool check(Clock::time_point now);  // true: stuck

  Upstream& upstream_;
  const int slot_;
  CancelScope& turn_;
  CancelScope& attempt_;
  const SilenceWatchOptions options_;
  std::function<void(std::string)> on_progress_;
  std::atomic<int64_t> last_heard_ns_;
  std::atomic<bool> stuck_{false};
  std::atomic<uint64_t> polls_{0};
  // Owned by the watch thread.
  Clock::time_point last_poll_{};
  Clock::time_point last_progress_{};
  std::optional<uint64_t> last_work_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;   // guarded by mu_
  std::thread thread_;  // last: starts after the members it uses
};

}  // namespace kvgate::gateway
