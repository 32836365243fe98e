// HttpServer: kvgate's HTTP/1.1 edge. A small blocking server, one thread per connection,
// built for what a gateway in front of a slow engine needs and generic libraries make hard:
//
//  - hard limits with proper answers: header bytes (431), body bytes (413 before the body is
//    read, also after "Expect: 100-continue"), chunk-size lines and trailers (400/431),
//    request-body bytes held across all connections (`max_body_bytes_in_flight`: 503 +
//    Retry-After), connection count (503 + Retry-After);
//  - the Host header checked against the names the server is known by (host_allow.h: a
//    defence against DNS rebinding), 403 otherwise;
//  - a head check before any body is read (`head_check`, the Gateway's route table and key):
//    a refused request (401/404/405) is answered from its head, and the connection closed
//    when its body was not read; the body of a request without a valid key is never read;
//  - connections in two pools (connection_table.h): those without a valid key share at most
//    `max_unauthenticated_connections`; when a pool is full, the connection idle longest
//    (keep-alive) or, without a key, waiting longest for its head is closed to admit the new
//    one; only when every connection is working does a new one get 503;
//  - deadlines against slow clients: a new connection's first request head must arrive
//    within `head_timeout` of the accept, a later one within `head_timeout` of its first byte;
//    the body must keep up a minimum rate of payload (checked as it arrives: after a
//    `body_grace` allowance, the payload bytes received must keep pace with
//    `min_body_bytes_per_s`; chunk framing does not count), otherwise the connection is
//    closed (408); idle keep-alive connections close after `idle_timeout`, or after
//    `scarce_idle_timeout` while at least 3/4 of `max_connections` are open;
//  - streaming: a handler may answer with a chunked stream and write event by event;
//    every write reports whether the client is still there;
//  - disconnect detection while a handler waits (ResponseWriter::client_gone()), so a
//    request whose client left can cancel its upstream work.
//
// Error answers produced by the server itself (parse errors, limits) are JSON in OpenAI's
// error format. Thread-safety: start()/stop() from one owner thread; handlers run
// concurrently on connection threads and must be thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "http/connection_table.h"
#include "http/http_message.h"
#include "util/result.h"

namespace kvgate::http {

using HeaderList = std::vector<std::pair<std::string, std::string>>;

// Given to a handler to answer one request. Exactly one of send() or begin_stream() … end
// is used; a handler that returns without answering gets a 500.
//
// The answering members are virtual so that a handler in front of other handlers (the Fleet,
// fleet.h) can hold back or capture what they answer; HttpServer uses this class itself.
class ResponseWriter {
 public:
  ResponseWriter(int fd, bool keep_alive, bool http10 = false)
      : fd_(fd), keep_alive_(keep_alive && !http10), http10_(http10) {}
  virtual ~ResponseWriter() = default;
  ResponseWriter(const ResponseWriter&) = delete;
  ResponseWriter& operator=(const ResponseWriter&) = delete;

  // An answer to HEAD: send() writes the head (with the body's Content-Length) without the body.
  void set_head_only(bool head_only) { head_only_ = head_only; }
  // A complete answer with Content-Length. Returns false if the client is gone.
  virtual bool send(int status, const HeaderList& headers, std::string_view body);
  // Starts a chunked answer; then write() pieces and end(). Each returns false once the
  // client is gone (later calls do nothing).
  virtual bool begin_stream(int status, const HeaderList& headers);
  virtual bool write(std::string_view data);
  virtual bool end();

  // Non-blocking check: has the client closed its side or reset the connection?
  virtual bool client_gone();
  virtual bool answered() const { return state_ != State::kIdle; }
  // A stream that another handler may finish (the Fleet's writer, fleet/fleet_writers.h):
  // continues_stream() — another handler began this request's stream, so its head and opening
  // events are out already; hand_on() — before any of the answer proper went out, give the
  // request to the next handler instead of ending the stream with `error_events` (kept, and
  // sent should no handler take it). Here: never.
  virtual bool continues_stream() const { return false; }
  virtual bool hand_on(int /*status*/, std::string_view /*error_events*/) { return false; }
  virtual int status() const { return status_; }
  uint64_t bytes_written() const { return bytes_written_; }
  bool keep_alive() const { return keep_alive_ && !broken_; }

 private:
  enum class State { kIdle, kStreaming, kDone };
  bool write_all(std::string_view data);

  int fd_;
  bool keep_alive_;
  bool http10_;  // no chunked coding: a stream is sent raw and ends with the connection
  bool head_only_ = false;
  bool broken_ = false;
  State state_ = State::kIdle;
  int status_ = 0;
  uint64_t bytes_written_ = 0;
};

using Handler = std::function<void(const HttpRequest&, ResponseWriter&)>;

// What a head check decided about a request from its head alone (no body read yet).
struct HeadVerdict {
  // The request carried a valid key (or none is needed by this server): the connection
  // counts as authenticated and the body may be read.
  bool authenticated = true;
  int status = 0;  // non-zero: answer this at once (with `headers` and `body`); no handler call
  HeaderList headers;
  std::string body;
};
// Called on a connection thread with the request's head (its body is empty); thread-safe.
using HeadCheck = std::function<HeadVerdict(const HttpRequest& head)>;

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8787;  // 0: pick a free port (see HttpServer::port())
  size_t max_connections = 256;
  // Of max_connections, those without a valid key; 0: a quarter of max_connections (at least 1).
  size_t max_unauthenticated_connections = 0;
  size_t max_body_bytes = 64 * 1024 * 1024;
  // Request-body bytes held across all connections (receiving and handling); never below
  // max_body_bytes.
  size_t max_body_bytes_in_flight = 128 * 1024 * 1024;
  HeadLimits head_limits;  // also bound a chunked body's trailers
  size_t max_chunk_size_line = 1024;  // a chunk-size line with its extensions
  std::chrono::milliseconds head_timeout{15000};
  std::chrono::milliseconds idle_timeout{5000};
  std::chrono::milliseconds scarce_idle_timeout{1000};
  // The body's payload must arrive at no less than this rate (after the `body_grace` allowance).
  size_t min_body_bytes_per_s = 32 * 1024;
  std::chrono::milliseconds body_grace{10000};
  // Unset: every request counts as authenticated and nothing is refused before the handler.
  HeadCheck head_check;
  // Host names requests may name besides localhost, `host` and IP address literals; "*": any
  // (host_allow.h). A request naming another Host gets 403 before anything else is checked.
  std::vector<std::string> allowed_hosts;
};

class HttpServer {
 public:
  HttpServer(HttpServerOptions options, Handler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and starts accepting on a background thread. Error if the address is in use.
  Status start();
  // Stops accepting, closes idle connections, waits for running handlers to finish.
  void stop();
  uint16_t port() const { return port_; }
  // Whether the bound address is a loopback address (127/8, ::1). Valid after start().
  bool bound_loopback() const { return bound_loopback_; }
  size_t active_connections() const { return active_.load(); }
  // Keep-alive connections between requests, waiting for the next one.
  size_t idle_connections() const { return table_.in_phase(ConnectionTable::Phase::kIdle); }
  // Connections closed to admit others (see connection_table.h).
  uint64_t evictions() const { return table_.evictions(); }
  uint64_t body_bytes_in_flight() const { return budget_.in_use(); }

 private:
  struct Connection;
  enum class Step { kNext, kClose };
  void accept_loop();
  void serve_connection(int fd, ConnectionTable::Id id, std::string remote);
  Step serve_request(Connection& c);
  bool wait_for_next_request(Connection& c);
  bool read_head(Connection& c, HeadParse& head);
  Step read_body(Connection& c, ParsedHead& h);
  Step decode_body(Connection& c, ParsedHead& h);
  void reject_busy(int fd);

  HttpServerOptions options_;
  Handler handler_;
  ConnectionTable table_;
  BodyBudget budget_;
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  bool bound_loopback_ = false;
  std::atomic<bool> stopping_{false};
  std::atomic<size_t> active_{0};
  std::thread acceptor_;
  std::mutex mu_;
  std::condition_variable idle_cv_;
  std::vector<int> open_fds_;  // guarded by mu_; shut down on stop()
};

// A JSON answer in OpenAI's error format for server-level failures.
std::string error_body(int status, std::string_view message);
const char* status_text(int status);

}  // namespace kvgate::http
