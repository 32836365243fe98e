// ResponseWriter and the server's own error answers (see http_server.h).
#include "http/http_server.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "util/json.h"
#include "util/socket.h"

namespace kvgate::http {
namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kWriteTimeout = std::chrono::seconds(60);

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
  return util::json_text(
      nlohmann::json{{"error", {{"message", message}, {"type", type}, {"param", nullptr}, {"code", status}}}});
}

// ---- ResponseWriter --------------------------------------------------------------------

bool ResponseWriter::write_all(std::string_view data) {
  if (broken_) return false;
  const auto deadline = Clock::now() + kWriteTimeout;
  while (!data.empty()) {
    const long n = util::send_bytes(fd_, data.data(), data.size(), true);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      bytes_written_ += static_cast<uint64_t>(n);
      continue;
    }
    if (n < 0 && (util::socket_would_block() || util::socket_interrupted())) {
      // A client that stops reading gets kWriteTimeout, then the connection is dropped.
      if (Clock::now() >= deadline) break;
      pollfd p = util::poll_entry(fd_, POLLOUT);
      util::poll_sockets(&p, 1, 1000);
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
  if (!head_only_) out.append(body);
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
  pollfd p = util::poll_entry(fd_, static_cast<short>(POLLIN | util::kPollReadHangup));
  if (util::poll_sockets(&p, 1, 0) <= 0) return false;
  if (p.revents & (util::kPollReadHangup | POLLHUP | POLLERR | POLLNVAL)) {
    broken_ = true;
    return true;
  }
  if (p.revents & POLLIN) {
    char c;
    const long n = util::recv_bytes(fd_, &c, 1, true, true);
    if (n == 0 || (n < 0 && !util::socket_would_block())) {
      broken_ = true;
      return true;
    }
  }
  return false;
}

}  // namespace kvgate::http
