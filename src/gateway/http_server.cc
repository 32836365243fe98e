#include "gateway/http_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace kvgate::gateway {
namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kWriteTimeout = std::chrono::seconds(60);

int ms_until(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 1000));
}

// Reads into `buf` until at least one byte arrives or the deadline passes. Returns bytes
// read, 0 on EOF, -1 on error/timeout. Wakes every second to notice `stopping`.
ssize_t read_some(int fd, std::string& buf, Clock::time_point deadline, const std::atomic<bool>& stopping) {
  char tmp[16384];
  for (;;) {
    if (stopping.load()) return -1;
    if (Clock::now() >= deadline) return -1;
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, ms_until(deadline));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) continue;
    const ssize_t n = ::recv(fd, tmp, sizeof tmp, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n > 0) buf.append(tmp, static_cast<size_t>(n));
    return n;
  }
}

}  // namespace

const char* status_text(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 411: return "Length Required";
    case 413: return "Payload Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 417: return "Expectation Failed";
    case 422: return "Unprocessable Entity";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    default: return "Status";
  }
}

std::string error_body(int status, std::string_view message) {
  const char* type = status >= 500 ? "server_error" : "invalid_request_error";
  return nlohmann::json{{"error", {{"message", message}, {"type", type}, {"param", nullptr}, {"code", status}}}}.dump();
}

// ---- ResponseWriter --------------------------------------------------------------------

bool ResponseWriter::write_all(std::string_view data) {
  if (broken_) return false;
  const auto deadline = Clock::now() + kWriteTimeout;
  while (!data.empty()) {
    const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      bytes_written_ += static_cast<uint64_t>(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      // A client that stops reading gets kWriteTimeout, then the connection is dropped.
      if (Clock::now() >= deadline) break;
      pollfd p{fd_, POLLOUT, 0};
      ::poll(&p, 1, 1000);
      continue;
    }
    break;
  }
  if (!data.empty()) broken_ = true;
  return !broken_;
}

static std::string head_text(int status, const HeaderList& headers, bool keep_alive) {
  std::string out = fmt::format("HTTP/1.1 {} {}\r\n", status, status_text(status));
  for (const auto& [k, v] : headers) out += k + ": " + v + "\r\n";
  out += keep_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
  return out;
}

bool ResponseWriter::send(int status, const HeaderList& headers, std::string_view body) {
  if (state_ != State::kIdle) return false;
  state_ = State::kDone;
  status_ = status;
  std::string out = head_text(status, headers, keep_alive_);
  out += fmt::format("Content-Length: {}\r\n\r\n", body.size());
  out.append(body);
  return write_all(out);
}

bool ResponseWriter::begin_stream(int status, const HeaderList& headers) {
  if (state_ != State::kIdle) return false;
  state_ = State::kStreaming;
  status_ = status;
  std::string out = head_text(status, headers, keep_alive_);
  if (!http10_) out += "Transfer-Encoding: chunked\r\n";
  out += "\r\n";
  return write_all(out);
}

bool ResponseWriter::write(std::string_view data) {
  if (state_ != State::kStreaming) return false;
  if (data.empty()) return !broken_;
  if (http10_) return write_all(data);
  std::string chunk = fmt::format("{:x}\r\n", data.size());
  chunk.append(data);
  chunk += "\r\n";
  return write_all(chunk);
}

bool ResponseWriter::end() {
  if (state_ != State::kStreaming) return false;
  state_ = State::kDone;
  if (http10_) {
    broken_ = true;  // the end of the body is the end of the connection
    return true;
  }
  return write_all("0\r\n\r\n");
}

bool ResponseWriter::client_gone() {
  if (broken_) return true;
  pollfd p{fd_, POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) {
    broken_ = true;
    return true;
  }
  if (p.revents & POLLIN) {
    char c;
    const ssize_t n = ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
      broken_ = true;
      return true;
    }
  }
  return false;
}

// ---- HttpServer ------------------------------------------------------------------------

HttpServer::HttpServer(HttpServerOptions options, Handler handler)
    : options_(std::move(options)), handler_(std::move(handler)) {}

HttpServer::~HttpServer() { stop(); }

Status HttpServer::start() {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string host = options_.host.empty() ? "0.0.0.0" : options_.host;
  const std::string port = std::to_string(options_.port);
  if (const int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &res); rc != 0) {
    return Error(fmt::format("cannot resolve listen address '{}': {}", host, ::gai_strerror(rc)));
  }
  int fd = ::socket(res->ai_family, res->ai_socktype | SOCK_CLOEXEC, res->ai_protocol);
  if (fd < 0) {
    ::freeaddrinfo(res);
    return Error(fmt::format("socket: {}", std::strerror(errno)));
  }
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd, res->ai_addr, res->ai_addrlen) != 0) {
    const int err = errno;
    ::freeaddrinfo(res);
    ::close(fd);
    if (err == EADDRINUSE) {
      return Error(fmt::format("cannot listen on {}:{}: the address is already in use by another process; choose "
                               "another --listen port or stop the process holding it",
                               host, options_.port));
    }
    return Error(fmt::format("cannot listen on {}:{}: {}", host, options_.port, std::strerror(err)));
  }
  ::freeaddrinfo(res);
  if (::listen(fd, 512) != 0) {
    const int err = errno;
    ::close(fd);
    return Error(fmt::format("listen: {}", std::strerror(err)));
  }
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
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
  ::close(listen_fd_);
  listen_fd_ = -1;
  std::unique_lock lock(mu_);
  for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);
  idle_cv_.wait(lock, [this] { return active_.load() == 0; });
}

void HttpServer::accept_loop() {
  while (!stopping_.load()) {
    pollfd p{listen_fd_, POLLIN, 0};
    const int r = ::poll(&p, 1, 200);
    if (r <= 0) continue;
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    const int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_CLOEXEC);
    if (fd < 0) continue;
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
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
    if (active_.load() >= options_.max_connections) {
      reject_busy(fd);
      continue;
    }
    {
      std::lock_guard lock(mu_);
      open_fds_.push_back(fd);
      ++active_;
    }
    std::thread([this, fd, remote = fmt::format("{}:{}", host, port)] { serve_connection(fd, remote); }).detach();
  }
}

void HttpServer::reject_busy(int fd) {
  ResponseWriter w(fd, false);
  w.send(503, {{"Content-Type", "application/json"}, {"Retry-After", "2"}},
         error_body(503, "kvgate has too many open connections; retry shortly"));
  ::close(fd);
}

void HttpServer::serve_connection(int fd, std::string remote) {
  std::string buf;
  bool keep_going = true;
  bool first_request = true;
  while (keep_going && !stopping_.load()) {
    // Wait for the first byte of the next request (idle timeout; a new connection gets only
    // the head time-out: connecting and sending nothing holds no thread for long), then the
    // whole head.
    auto deadline = Clock::now() + (first_request ? options_.head_timeout : options_.idle_timeout);
    first_request = false;
    HeadParse head;
    bool started = !buf.empty();
    if (started) deadline = Clock::now() + options_.head_timeout;
    for (;;) {
      head = parse_request_head(buf, options_.head_limits);
      if (head.state != HeadParse::State::kIncomplete) break;
      const ssize_t n = read_some(fd, buf, deadline, stopping_);
      if (n <= 0) {
        if (started && n < 0 && !stopping_.load()) {
          ResponseWriter w(fd, false);
          w.send(408, {{"Content-Type", "application/json"}}, error_body(408, "request head not received in time"));
        }
        keep_going = false;
        break;
      }
      if (!started) {
        started = true;
        deadline = Clock::now() + options_.head_timeout;
      }
    }
    if (!keep_going) break;
    if (head.state == HeadParse::State::kError) {
      ResponseWriter w(fd, false);
      w.send(head.error.status, {{"Content-Type", "application/json"}}, error_body(head.error.status, head.error.message));
      break;
    }
    ParsedHead& h = head.head;
    h.request.remote = remote;
    buf.erase(0, h.head_bytes);
    ResponseWriter writer(fd, h.request.keep_alive(), h.request.version_minor == 0);

    // Body.
    if (h.body_kind == BodyKind::kLength && h.content_length > options_.max_body_bytes) {
      writer = ResponseWriter(fd, false);
      writer.send(413, {{"Content-Type", "application/json"}},
                  error_body(413, fmt::format("request body of {} bytes exceeds the limit of {} bytes",
                                              h.content_length, options_.max_body_bytes)));
      break;
    }
    if (h.expect_continue && h.body_kind != BodyKind::kNone) {
      const std::string cont = "HTTP/1.1 100 Continue\r\n\r\n";
      ::send(fd, cont.data(), cont.size(), MSG_NOSIGNAL);
    }
    // The body must keep pace: by grace + n / rate after its start, n bytes must have come.
    const auto body_start = Clock::now();
    const auto body_deadline = [&](uint64_t received) {
      return body_start + options_.body_grace +
             std::chrono::milliseconds(received * 1000 / std::max<size_t>(options_.min_body_bytes_per_s, 1));
    };
    bool body_ok = true;
    if (h.body_kind == BodyKind::kLength) {
      const auto want = static_cast<size_t>(h.content_length);
      while (buf.size() < want) {
        if (read_some(fd, buf, body_deadline(buf.size()), stopping_) <= 0) {
          body_ok = false;
          break;
        }
      }
      if (body_ok) {
        h.request.body = buf.substr(0, want);
        buf.erase(0, want);
      }
    } else if (h.body_kind == BodyKind::kChunked) {
      ChunkedDecoder dec(options_.max_body_bytes);
      uint64_t received = 0;
      for (;;) {
        const size_t used = dec.feed(buf, h.request.body);
        received += used;
        buf.erase(0, used);
        if (dec.state() != ChunkedDecoder::State::kNeedMore) break;
        if (read_some(fd, buf, body_deadline(received + buf.size()), stopping_) <= 0) {
          body_ok = false;
          break;
        }
      }
      if (dec.state() == ChunkedDecoder::State::kTooLarge) {
        writer = ResponseWriter(fd, false);
        writer.send(413, {{"Content-Type", "application/json"}},
                    error_body(413, fmt::format("request body exceeds the limit of {} bytes", options_.max_body_bytes)));
        break;
      }
      if (dec.state() == ChunkedDecoder::State::kError) {
        writer = ResponseWriter(fd, false);
        writer.send(400, {{"Content-Type", "application/json"}}, error_body(400, "malformed chunked request body"));
        break;
      }
    }
    if (!body_ok) {
      if (!stopping_.load()) {
        ResponseWriter w(fd, false);
        w.send(408, {{"Content-Type", "application/json"}}, error_body(408, "request body not received in time"));
      }
      break;
    }

    handler_(h.request, writer);
    if (!writer.answered()) {
      writer.send(500, {{"Content-Type", "application/json"}}, error_body(500, "the handler produced no answer"));
    } else if (writer.status() != 0 && !writer.keep_alive()) {
      keep_going = false;
    }
    writer.end();  // no-op unless a stream was left open
    keep_going = keep_going && writer.keep_alive();
  }
  {
    std::lock_guard lock(mu_);
    open_fds_.erase(std::remove(open_fds_.begin(), open_fds_.end(), fd), open_fds_.end());
    ::close(fd);
    --active_;
    // Notify under the lock: once it is released, stop() may return and destroy *this.
    idle_cv_.notify_all();
  }
}

}  // namespace kvgate::gateway
