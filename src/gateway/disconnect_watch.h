// DisconnectWatch: while a request waits for a whole (non-streamed) engine answer, nothing is
// written to its client, so a client that leaves is only noticed by looking. The watch looks
// every `interval` on its own thread and cancels the upstream call when the client is gone;
// destroying it stops the thread at once (no waiting out the interval).
//
// Thread-safety: constructed and destroyed by the request's thread; the watch thread only
// calls `client_gone` (which must be safe to call from it: ResponseWriter::client_gone() is)
// and CancelScope::cancel(), which is thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "upstream/upstream.h"

namespace kvgate::gateway {

class DisconnectWatch {
 public:
  DisconnectWatch(std::function<bool()> client_gone, CancelScope& cancel,
                  std::chrono::milliseconds interval = std::chrono::milliseconds(100))
      : thread_([this, gone = std::move(client_gone), &cancel, interval] {
          std::unique_lock lock(mu_);
          while (!stop_) {
            if (gone()) {
              cancel.cancel();
              return;
            }
            cv_.wait_for(lock, interval, [this] { return stop_; });
          }
        }) {}
  ~DisconnectWatch() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  DisconnectWatch(const DisconnectWatch&) = delete;
  DisconnectWatch& operator=(const DisconnectWatch&) = delete;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_
  std::thread thread_;  // last: starts after the members it uses
};

}  // namespace kvgate::gateway
