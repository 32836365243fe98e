// StreamRelay: the client side of one streamed answer.
//
// The handler thread relays upstream events through it while a ticker thread keeps the
// client connection alive and watches it:
//   - if the engine has not answered within `head_grace`, the client's 200 + SSE headers go
//     out anyway (streaming starts at once) — later engine errors become error events;
//   - while nothing has been written for `keepalive`, an SSE comment is sent (": keep-alive",
//     or prefill progress when known), so proxies and clients never time out a long prefill;
//   - when the client disconnects, the upstream request is cancelled.
// All writes go through one mutex. The ticker stops in finish() (or the destructor).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "gateway/upstream.h"
#include "http/http_server.h"

namespace kvgate::gateway {

using http::ResponseWriter;

class StreamRelay {
 public:
  StreamRelay(ResponseWriter& writer, CancelScope& cancel, std::chrono::milliseconds head_grace,
              std::chrono::milliseconds keepalive);
  ~StreamRelay();
  StreamRelay(const StreamRelay&) = delete;
  StreamRelay& operator=(const StreamRelay&) = delete;

  // Starts the client's SSE answer if not started yet. Returns false if the client is gone.
  bool begin();
  bool started();
  // Writes one complete SSE event (raw text). Returns false if the client is gone.
  bool write(std::string_view event);
  // Text for the next keep-alive comment (e.g. "prefill 1200/5000 tokens").
  void set_progress(std::string text);
  bool client_gone() const { return gone_.load(); }
  // Ends the stream (chunked terminator) and stops the ticker.
  void finish();

 private:
  void tick();
  bool begin_locked();  // REQUIRES: mu_ held

  ResponseWriter& writer_;
  CancelScope& cancel_;
  const std::chrono::milliseconds head_grace_;
  const std::chrono::milliseconds keepalive_;
  const std::chrono::steady_clock::time_point created_ = std::chrono::steady_clock::now();
  std::mutex mu_;
  std::condition_variable cv_;
  bool started_ = false;  // guarded by mu_
  bool finished_ = false;  // guarded by mu_
  std::string progress_;   // guarded by mu_
  std::chrono::steady_clock::time_point last_write_ = created_;  // guarded by mu_
  std::atomic<bool> gone_{false};
  std::thread ticker_;
};

}  // namespace kvgate::gateway
