// StreamRelay: the client side of one streamed answer.
//
// The handler thread relays upstream events through it while a ticker thread keeps the
// client connection alive and watches it:
//   - if the engine has not answered within `head_grace`, the client's 200 + SSE headers go
//     out anyway (streaming starts at once) — later engine errors become error events;
//   - while nothing has been written for `keepalive`, a keep-alive is sent (in the stream's own
//     format: chat completions writes an SSE comment ": keep-alive", or the prefill progress
//     when known; Anthropic's Messages API an `event: ping`), so proxies and clients never
//     time out a long prefill;
//   - when the client disconnects, the upstream request is cancelled.
// All writes go through one mutex. The ticker stops in finish() (or the destructor).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "upstream/upstream.h"
#include "http/http_server.h"

namespace kvgate::gateway {

using http::ResponseWriter;

// ": ABOUT\n\n": an SSE comment, which every SSE client skips.
std::string sse_comment(std::string_view about);

struct RelayOptions {
  std::chrono::milliseconds head_grace{1500};
  std::chrono::milliseconds keepalive{10000};
  // What is written while the engine is silent, given what the wait is about: "keep-alive",
  // the engine's progress (set_progress), or "kvgate: waiting for the engine" when the
  // stream starts before the engine answered. Called with the relay's lock held.
  std::function<std::string(std::string_view about)> keepalive_text = sse_comment;
};

class StreamRelay {
 public:
  StreamRelay(ResponseWriter& writer, CancelScope& cancel, RelayOptions options);
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
  const RelayOptions options_;
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
