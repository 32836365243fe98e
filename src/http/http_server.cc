#include "http/http_server.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "http/content_coding.h"
#include "http/host_allow.h"
#include "util/memory_trim.h"
#include "util/socket.h"

namespace kvgate::http {
namespace {

using Clock = std::chrono::steady_clock;

constexpr ssize_t kTimedOut = -2;
// After a request whose body held at least this much, freed memory is given back to the
// system (glibc keeps it in its arenas otherwise, and RSS stays at the peak).
constexpr uint64_t kTrimAfterBodyBytes = 1 << 20;

int ms_until(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 1000));
}

// Reads up to `max` bytes into `buf` once at least one arrives. Returns bytes read, 0 on
// EOF, -1 on error, kTimedOut when the deadline passes first. Wakes every second to notice
// `stopping`.
ssize_t read_some(int fd, std::string& buf, Clock::time_point deadline, const std::atomic<bool>& stopping,
                  size_t max = 16384) {
  char tmp[16384];
  max = std::min(max, sizeof tmp);
  for (;;) {
    if (stopping.load()) return -1;
    if (Clock::now() >= deadline) return kTimedOut;
    pollfd p = util::poll_entry(fd, POLLIN);
    const int r = util::poll_sockets(&p, 1, ms_until(deadline));
    if (r < 0 && util::socket_interrupted()) continue;
    if (r < 0) return -1;
    if (r == 0) continue;
    const ssize_t n = util::recv_bytes(fd, tmp, max);
    if (n < 0 && (util::socket_interrupted() || util::socket_would_block())) continue;
    if (n > 0) buf.append(tmp, static_cast<size_t>(n));
    return n;
  }
}

void set_reuse_address(int fd) {
#ifndef _WIN32  // on Windows SO_REUSEADDR lets another process take a port in use
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
#else
  (void)fd;
#endif
}

void set_no_delay(int fd) {
  const int one = 1;
  ::setsockopt(util::native_socket(fd), IPPROTO_TCP, TCP_NODELAY, reinterpret_cast<const char*>(&one), sizeof one);
}

// A server-made error answer, after which the connection is closed.
void answer_and_close(int fd, int status, std::string_view message, HeaderList headers = {}) {
  headers.emplace_back("Content-Type", "application/json");
  ResponseWriter w(fd, false);
  w.send(status, headers, error_body(status, message));
}

// Closing with unread bytes makes the kernel reset the connection, and a client still
// sending may then lose the answer before reading it. So: end our side (a FIN after the
// answer), discard what still arrives for a moment, then close.
void linger_before_close(int fd) {
  ::shutdown(util::native_socket(fd), util::kShutWrite);
  const auto deadline = Clock::now() + std::chrono::milliseconds(500);
  char tmp[16384];
  size_t discarded = 0;
  while (Clock::now() < deadline && discarded < (1u << 20)) {
    pollfd p = util::poll_entry(fd, POLLIN);
    if (util::poll_sockets(&p, 1, 50) <= 0) continue;
    const ssize_t n = util::recv_bytes(fd, tmp, sizeof tmp);
    if (n <= 0) break;
    discarded += static_cast<size_t>(n);
  }
}

void answer_over_budget(int fd, uint64_t limit) {
  answer_and_close(fd, 503,
                   fmt::format("request bodies being received exceed kvgate's budget of {} bytes in flight; retry "
                               "shortly",
                               limit),
                   {{"Retry-After", "2"}});
}

size_t unauthenticated_limit(const HttpServerOptions& o) {
  if (o.max_unauthenticated_connections == 0) return std::max<size_t>(1, o.max_connections / 4);
  return std::min(o.max_unauthenticated_connections, o.max_connections);
}

// Bytes taken from the body budget for one request, given back when it is done.
class BudgetHold {
 public:
  explicit BudgetHold(BodyBudget& budget) : budget_(budget) {}
  ~BudgetHold() { budget_.give_back(held_); }
  BudgetHold(const BudgetHold&) = delete;
  BudgetHold& operator=(const BudgetHold&) = delete;
  // Holds at least `bytes` in total; false when the budget cannot give the rest.
  bool hold(uint64_t bytes) {
    if (bytes <= held_) return true;
    if (!budget_.take(bytes - held_)) return false;
    held_ = bytes;
    return true;
  }
  uint64_t held() const { return held_; }

 private:
  BodyBudget& budget_;
  uint64_t held_ = 0;
};

}  // namespace

struct HttpServer::Connection {
  int fd;
  ConnectionTable::Id id;
  std::string remote;
  std::string buf;  // bytes received and not yet consumed
  bool first_request = true;
  bool body_unread = false;  // the current request's body was not (wholly) read
  std::optional<BudgetHold> hold;  // the current request's body bytes
};

HttpServer::HttpServer(HttpServerOptions options, Handler handler)
    : options_(std::move(options)),
      handler_(std::move(handler)),
      table_({.max_connections = options_.max_connections, .max_unauthenticated = unauthenticated_limit(options_)},
             [](int fd) { ::shutdown(util::native_socket(fd), util::kShutRead); }),
      budget_(std::max(options_.max_body_bytes_in_flight, options_.max_body_bytes)) {}

HttpServer::~HttpServer() { stop(); }

Status HttpServer::start() {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  util::init_sockets();
  const std::string host = options_.host.empty() ? "0.0.0.0" : options_.host;
  const std::string port = std::to_string(options_.port);
  if (const int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &res); rc != 0) {
    return Error(fmt::format("cannot resolve listen address '{}': {}", host, ::gai_strerror(rc)));
  }
  int fd = util::open_socket(res->ai_family, res->ai_socktype, res->ai_protocol);
  if (fd < 0) {
    ::freeaddrinfo(res);
    return Error(fmt::format("socket: {}", util::socket_error_text()));
  }
  set_reuse_address(fd);
  if (::bind(util::native_socket(fd), res->ai_addr, static_cast<util::socklen_t>(res->ai_addrlen)) != 0) {
    const bool in_use = util::socket_address_in_use();
    const std::string err = util::socket_error_text();
    ::freeaddrinfo(res);
    util::close_socket(fd);
    if (in_use) {
      return Error(fmt::format("cannot listen on {}:{}: the address is already in use by another process; choose "
                               "another --listen port or stop the process holding it",
                               host, options_.port));
    }
    return Error(fmt::format("cannot listen on {}:{}: {}", host, options_.port, err));
  }
  ::freeaddrinfo(res);
  if (::listen(util::native_socket(fd), 512) != 0) {
    Error e(fmt::format("listen: {}", util::socket_error_text()));
    util::close_socket(fd);
    return e;
  }
  sockaddr_storage addr{};
  util::socklen_t len = sizeof addr;
  ::getsockname(util::native_socket(fd), reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port
                                           : reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  if (addr.ss_family == AF_INET) {
    bound_loopback_ = (ntohl(reinterpret_cast<sockaddr_in*>(&addr)->sin_addr.s_addr) >> 24) == 127;
  } else if (addr.ss_family == AF_INET6) {
    const in6_addr& a6 = reinterpret_cast<sockaddr_in6*>(&addr)->sin6_addr;
    bound_loopback_ = IN6_IS_ADDR_LOOPBACK(&a6) || (IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127);
  }
  listen_fd_ = fd;
  stopping_ = false;
  acceptor_ = std::thread([this] { accept_loop(); });
  return {};
}

void HttpServer::stop() {
  if (listen_fd_ < 0) return;
  stopping_ = true;
  if (acceptor_.joinable()) acceptor_.join();
  util::close_socket(listen_fd_);
  listen_fd_ = -1;
  std::unique_lock lock(mu_);
  for (int fd : open_fds_) ::shutdown(util::native_socket(fd), util::kShutBoth);
  idle_cv_.wait(lock, [this] { return active_.load() == 0; });
}

void HttpServer::accept_loop() {
  while (!stopping_.load()) {
    pollfd p = util::poll_entry(listen_fd_, POLLIN);
    const int r = util::poll_sockets(&p, 1, 200);
    if (r <= 0) continue;
    sockaddr_storage addr{};
    util::socklen_t len = sizeof addr;
    const int fd = util::accept_socket(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    if (fd < 0) continue;
    set_no_delay(fd);
    char host[INET6_ADDRSTRLEN] = "?";
    uint16_t port = 0;
    if (addr.ss_family == AF_INET) {
      auto* in = reinterpret_cast<sockaddr_in*>(&addr);
      ::inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
      port = ntohs(in->sin_port);
    } else if (addr.ss_family == AF_INET6) {
      auto* in6 = reinterpret_cast<sockaddr_in6*>(&addr);
      ::inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
      port = ntohs(in6->sin6_port);
    }
    const auto id = table_.admit(fd);
    if (!id) {
      reject_busy(fd);
      continue;
    }
    {
      std::lock_guard lock(mu_);
      open_fds_.push_back(fd);
      ++active_;
    }
    std::thread([this, fd, id = *id, remote = fmt::format("{}:{}", host, port)] {
      serve_connection(fd, id, remote);
    }).detach();
  }
}

void HttpServer::reject_busy(int fd) {
  answer_and_close(fd, 503, "kvgate has too many open connections, all of them working; retry shortly",
                   {{"Retry-After", "2"}});
  util::close_socket(fd);
}

void HttpServer::serve_connection(int fd, ConnectionTable::Id id, std::string remote) {
  Connection c{.fd = fd, .id = id, .remote = std::move(remote)};
  while (!stopping_.load() && serve_request(c) == Step::kNext) {
  }
  if (c.body_unread && !stopping_.load()) {
    table_.set_phase(id, ConnectionTable::Phase::kIdle);  // answered: it may give way to a new one
    linger_before_close(fd);
  }
  table_.remove(id);  // before the fd is closed: the table may shut it down until then
  {
    std::lock_guard lock(mu_);
    open_fds_.erase(std::remove(open_fds_.begin(), open_fds_.end(), fd), open_fds_.end());
    util::close_socket(fd);
    --active_;
    // Notify under the lock: once it is released, stop() may return and destroy *this.
    idle_cv_.notify_all();
  }
}

bool HttpServer::wait_for_next_request(Connection& c) {
  table_.set_phase(c.id, ConnectionTable::Phase::kIdle);
  const auto since = Clock::now();
  for (;;) {
    if (stopping_.load() || table_.evicted(c.id)) return false;
    // Re-read every slice: the idle time-out shrinks while connection slots are scarce.
    const auto limit = table_.scarce() ? options_.scarce_idle_timeout : options_.idle_timeout;
    const auto end = since + limit;
    if (Clock::now() >= end) return false;
    const ssize_t n =
        read_some(c.fd, c.buf, std::min(end, Clock::now() + std::chrono::milliseconds(250)), stopping_);
    if (n > 0) return true;
    if (n != kTimedOut) return false;
  }
}

bool HttpServer::read_head(Connection& c, HeadParse& head) {
  table_.set_phase(c.id, ConnectionTable::Phase::kHead);
  // A new connection's head must come within head_timeout of the accept (connecting and
  // sending nothing holds no thread for long); any head within head_timeout of its first byte.
  bool started = !c.buf.empty();
  auto deadline = Clock::now() + options_.head_timeout;
  for (;;) {
    head = parse_request_head(c.buf, options_.head_limits);
    if (head.state != HeadParse::State::kIncomplete) return true;
    const ssize_t n = read_some(c.fd, c.buf, deadline, stopping_);
    if (n > 0) {
      if (!started) deadline = Clock::now() + options_.head_timeout;
      started = true;
      continue;
    }
    if (stopping_.load()) return false;
    if (table_.evicted(c.id)) {
      if (started) {
        answer_and_close(c.fd, 503, "connection closed to admit other clients (kvgate is at its connection limit)",
                         {{"Retry-After", "2"}});
      }
    } else if (started && n == kTimedOut) {
      answer_and_close(c.fd, 408, "request head not received in time");
    }
    return false;
  }
}

HttpServer::Step HttpServer::serve_request(Connection& c) {
  if (!c.first_request && c.buf.empty() && !wait_for_next_request(c)) return Step::kClose;
  c.first_request = false;
  HeadParse head;
  if (!read_head(c, head)) return Step::kClose;
  if (head.state == HeadParse::State::kError) {
    answer_and_close(c.fd, head.error.status, head.error.message);
    return Step::kClose;
  }
  table_.set_phase(c.id, ConnectionTable::Phase::kWorking);
  if (table_.evicted(c.id)) {  // between its last bytes and now
    answer_and_close(c.fd, 503, "connection closed to admit other clients (kvgate is at its connection limit)",
                     {{"Retry-After", "2"}});
    return Step::kClose;
  }
  ParsedHead& h = head.head;
  h.request.remote = c.remote;
  if (auto host = h.request.header("host"); host && !host_allowed(*host, options_.host, options_.allowed_hosts)) {
    answer_and_close(c.fd, 403, host_refusal(*host));
    return Step::kClose;
  }
  c.buf.erase(0, h.head_bytes);
  const bool has_body = h.body_kind != BodyKind::kNone;
  c.body_unread = has_body;
  const bool http10 = h.request.version_minor == 0;

  // The route and key, from the head alone.
  const HeadVerdict verdict = options_.head_check ? options_.head_check(h.request) : HeadVerdict{};
  const bool may_stay = table_.set_authenticated(c.id, verdict.authenticated) && h.request.keep_alive();
  if (verdict.status != 0) {
    // The body is not read: the connection stays open only when there is none.
    ResponseWriter w(c.fd, may_stay && !has_body, http10);
    w.set_head_only(h.request.method == "HEAD");
    w.send(verdict.status, verdict.headers, verdict.body);
    return w.keep_alive() ? Step::kNext : Step::kClose;
  }
  if (has_body && !verdict.authenticated) {
    answer_and_close(c.fd, 401, "a request body is read only with a valid API key: send 'Authorization: Bearer <key>'");
    return Step::kClose;
  }

  ResponseWriter writer(c.fd, may_stay, http10);
  writer.set_head_only(h.request.method == "HEAD");
  c.hold.emplace(budget_);
  if (read_body(c, h) == Step::kClose || decode_body(c, h) == Step::kClose) {
    c.hold.reset();
    return Step::kClose;
  }
  handler_(h.request, writer);
  if (!writer.answered()) {
    writer.send(500, {{"Content-Type", "application/json"}}, error_body(500, "the handler produced no answer"));
  }
  writer.end();  // no-op unless a stream was left open
  const uint64_t held = c.hold->held();
  std::string().swap(h.request.body);
  c.hold.reset();
  if (held >= kTrimAfterBodyBytes) util::trim_heap();
  return writer.keep_alive() ? Step::kNext : Step::kClose;
}

HttpServer::Step HttpServer::read_body(Connection& c, ParsedHead& h) {
  if (h.body_kind == BodyKind::kNone) return Step::kNext;
  const auto over_budget = [&] {
    answer_over_budget(c.fd, budget_.limit());
    return Step::kClose;
  };
  if (h.body_kind == BodyKind::kLength) {
    if (h.content_length > options_.max_body_bytes) {
      answer_and_close(c.fd, 413, fmt::format("request body of {} bytes exceeds the limit of {} bytes",
                                              h.content_length, options_.max_body_bytes));
      return Step::kClose;
    }
    if (!c.hold->hold(h.content_length)) return over_budget();
  }
  if (h.expect_continue) {
    const std::string_view cont = "HTTP/1.1 100 Continue\r\n\r\n";
    util::send_bytes(c.fd, cont.data(), cont.size(), false);
  }
  // The payload must keep pace: by grace + n / rate after the body's start, n bytes must have come.
  const auto body_start = Clock::now();
  const auto body_deadline = [&](uint64_t payload) {
    return body_start + options_.body_grace +
           std::chrono::milliseconds(payload * 1000 / std::max<size_t>(options_.min_body_bytes_per_s, 1));
  };
  const auto too_slow = [&] {
    if (!stopping_.load()) answer_and_close(c.fd, 408, "request body not received in time");
    return Step::kClose;
  };
  std::string& body = h.request.body;
  if (h.body_kind == BodyKind::kLength) {
    const auto want = static_cast<size_t>(h.content_length);
    body.reserve(want);
    const size_t buffered = std::min(c.buf.size(), want);
    body.append(c.buf, 0, buffered);
    c.buf.erase(0, buffered);
    while (body.size() < want) {
      if (read_some(c.fd, body, body_deadline(body.size()), stopping_, want - body.size()) <= 0) return too_slow();
    }
    c.body_unread = false;
    return Step::kNext;
  }
  ChunkedDecoder dec(ChunkedLimits{.max_body = options_.max_body_bytes,
                                   .max_size_line = options_.max_chunk_size_line,
                                   .max_trailer_bytes = options_.head_limits.max_head_bytes,
                                   .max_trailers = options_.head_limits.max_headers});
  for (;;) {
    c.buf.erase(0, dec.feed(c.buf, body));
    if (!c.hold->hold(body.capacity())) return over_budget();
    if (dec.state() != ChunkedDecoder::State::kNeedMore) break;
    if (read_some(c.fd, c.buf, body_deadline(body.size()), stopping_) <= 0) return too_slow();
  }
  switch (dec.state()) {
    case ChunkedDecoder::State::kDone:
      c.body_unread = false;
      return Step::kNext;
    case ChunkedDecoder::State::kTooLarge:
      answer_and_close(c.fd, 413, dec.error());
      return Step::kClose;
    case ChunkedDecoder::State::kTrailersTooLarge:
      answer_and_close(c.fd, 431, dec.error());
      return Step::kClose;
    default:
      answer_and_close(c.fd, 400, "malformed chunked request body: " + dec.error());
      return Step::kClose;
  }
}

// A body sent with Content-Encoding is decoded here, within the same size limit as a plain
// one (content_coding.h), and handed on as if sent plain: the header is dropped.
HttpServer::Step HttpServer::decode_body(Connection& c, ParsedHead& h) {
  std::string encoding;
  auto& headers = h.request.headers;
  for (const auto& [name, value] : headers) {
    if (name != "content-encoding") continue;
    if (!encoding.empty()) encoding += ',';
    encoding += value;
  }
  if (encoding.empty()) return Step::kNext;
  const size_t sent = h.request.body.size();
  auto decoded = decode_content(encoding, std::move(h.request.body), options_.max_body_bytes);
  if (!decoded.ok()) {
    answer_and_close(c.fd, decoded.error().status, "request body: " + decoded.error().message);
    return Step::kClose;
  }
  h.request.body = std::move(decoded).value();
  std::erase_if(headers, [](const auto& header) { return header.first == "content-encoding"; });
  if (!c.hold->hold(sent + h.request.body.size())) {
    answer_over_budget(c.fd, budget_.limit());
    return Step::kClose;
  }
  return Step::kNext;
}

}  // namespace kvgate::http
