// Test support for the fault-injection, abuse and load suites (docs/RELIABILITY.md).
//
//  - FakeEngine: a loopback HTTP responder on raw sockets, for the engine faults the real
//    engine cannot be made to produce on demand (garbage bytes, a truncated event stream, a
//    stall after the response head, 5xx answers while /health and /slots are fine). Each
//    connection runs the test's handler, which writes whatever bytes it wants and may close
//    the connection mid-answer.
//  - RawConnection: a client socket for abuse cases (slow heads and bodies, oversized heads).
//  - stream_request(): an SSE client that records events, their timing and how the stream
//    ended.
//  - Reliability records: each case writes its measured outcome as JSON into
//    $KVGATE_RELIABILITY_OUT (scripts/reliability.sh turns them into the RELIABILITY.md table).
//  - long_suite_enabled(): the long cases run only with KVGATE_FAULTS=1.
//
// Thread-safety: FakeEngine serves each connection on its own thread; its counters are
// atomics and its request log is locked. The rest is for one thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "upstream/upstream.h"

namespace kvgate::testing {

using gateway::EngineEndpoint;

// One request as the fake engine received it.
struct FakeRequest {
  std::string method;
  std::string path;
  std::string body;
};

// The fake engine's side of one connection.
class FakeConnection {
 public:
  explicit FakeConnection(int fd, const std::atomic<bool>& stopping) : fd_(fd), stopping_(stopping) {}
  bool write(std::string_view bytes);
  // A complete answer with Content-Length.
  void answer(int status, std::string_view content_type, std::string_view body);
  // Status line and headers of a chunked answer; then chunk() pieces.
  void begin_chunked(int status, std::string_view content_type);
  void chunk(std::string_view data);
  void end_chunked();
  // Waits until the fake engine stops or the client closes the connection.
  void stall();
  // Closes the connection now (a crash mid-answer).
  void abort();
  bool closed() const { return fd_ < 0; }

 private:
  int fd_;
  const std::atomic<bool>& stopping_;
};

using FakeHandler = std::function<void(const FakeRequest&, FakeConnection&)>;

class FakeEngine {
 public:
  explicit FakeEngine(FakeHandler handler);
  ~FakeEngine();
  FakeEngine(const FakeEngine&) = delete;
  FakeEngine& operator=(const FakeEngine&) = delete;

  uint16_t port() const { return port_; }
  EngineEndpoint endpoint() const;
  std::vector<FakeRequest> requests();
  size_t count(const std::string& path);
  void stop();

  // Ready-made answers of a llama-server: /health, /slots, /props, /metrics (501: not
  // exported), a 1-token completion.
  // Returns true when it answered.
  static bool answer_basics(const FakeRequest& r, FakeConnection& c);
  // A well-formed chat completion (non-stream) or event stream with `words` words.
  static void answer_chat(const FakeRequest& r, FakeConnection& c, int words = 3);

 private:
  void accept_loop();
  void serve(int fd);

  FakeHandler handler_;
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<std::thread> workers_;   // guarded by mu_
  std::vector<FakeRequest> requests_;  // guarded by mu_
};

// A raw client connection to 127.0.0.1:port.
class RawConnection {
 public:
  explicit RawConnection(uint16_t port);
  ~RawConnection();
  bool ok() const { return fd_ >= 0; }
  bool send(std::string_view bytes);
  // Sends as much of `bytes` as the peer takes within `timeout` (it may stop reading);
  // returns how many bytes were sent. Stops at an error (the peer closed).
  size_t send_within(std::string_view bytes, std::chrono::milliseconds timeout);
  // Reads until the peer closes or `timeout` passes; returns what arrived.
  std::string read_all(std::chrono::milliseconds timeout);
  // Whether the peer closed the connection within `timeout` (data that arrives is discarded).
  bool closed_within(std::chrono::milliseconds timeout);
  // The same without waiting: whether the peer has closed (or reset) the connection by now.
  bool closed_now();

 private:
  int fd_ = -1;
};

// A streamed request through kvgate, as a client sees it.
struct StreamOutcome {
  int status = 0;
  int retry_after_s = 0;               // the Retry-After header, when sent
  bool transport_error = false;        // the connection broke before the chunked terminator
  std::vector<nlohmann::json> chunks;  // data events that parsed as JSON
  std::vector<std::string> comments;
  bool done = false;                    // "data: [DONE]" arrived
  std::optional<nlohmann::json> error;  // an in-stream {"error": ...} event
  std::string content;                  // concatenated delta contents
  std::string body;                     // the whole body
  double ms = 0;                        // request to end of stream
  double first_content_ms = -1;
};
// POSTs `body` to /v1/chat/completions with stream=true. `on_event` sees the outcome so far
// after each data event and each comment (return false to disconnect).
StreamOutcome stream_request(uint16_t port, nlohmann::json body,
                             const std::vector<std::pair<std::string, std::string>>& headers = {},
                             std::chrono::seconds timeout = std::chrono::seconds(120),
                             const std::function<bool(const StreamOutcome&)>& on_event = nullptr);

// Whether the long fault/abuse/load cases are enabled (KVGATE_FAULTS=1).
bool long_suite_enabled();
#define KVGATE_REQUIRE_LONG_SUITE()                                                          \
  do {                                                                                       \
    if (!::kvgate::testing::long_suite_enabled())                                   \
      GTEST_SKIP() << "long fault suite: run with KVGATE_FAULTS=1 (scripts/reliability.sh)"; \
  } while (0)

// Writes the measured outcome of one case for the reliability table, when
// $KVGATE_RELIABILITY_OUT is set. `record` holds at least: expected, faults, client
// (status/kind → count); sessions_lost and crashes only where the test counts them. `result`
// is "fail" when the running test has failed so far, else the record's own or "pass".
void record_reliability(const std::string& case_id, nlohmann::json record);

// Resident set size of a process in KiB (0 if unknown).
uint64_t rss_kib(int pid);

}  // namespace kvgate::testing
