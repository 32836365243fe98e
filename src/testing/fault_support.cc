#include "testing/fault_support.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <arpa/inet.h>
#include <fmt/format.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http/sse.h"
#include "util/time.h"

namespace kvgate::testing {

using http::SseParser;

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// ---- FakeConnection ---------------------------------------------------------------------

bool FakeConnection::write(std::string_view bytes) {
  while (fd_ >= 0 && !bytes.empty()) {
    const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return fd_ >= 0;
}

void FakeConnection::answer(int status, std::string_view content_type, std::string_view body) {
  write(fmt::format("HTTP/1.1 {} X\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    status, content_type, body.size()));
  write(body);
}

void FakeConnection::begin_chunked(int status, std::string_view content_type) {
  write(fmt::format(
      "HTTP/1.1 {} X\r\nContent-Type: {}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n", status,
      content_type));
}

void FakeConnection::chunk(std::string_view data) {
  if (data.empty()) return;
  write(fmt::format("{:x}\r\n", data.size()));
  write(data);
  write("\r\n");
}

void FakeConnection::end_chunked() { write("0\r\n\r\n"); }

void FakeConnection::stall() {
  while (fd_ >= 0 && !stopping_.load()) {
    pollfd p{fd_, POLLIN | POLLRDHUP, 0};
    if (::poll(&p, 1, 50) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR))) return;
  }
}

void FakeConnection::abort() {
  if (fd_ < 0) return;
  ::shutdown(fd_, SHUT_RDWR);
  ::close(fd_);
  fd_ = -1;
}

// ---- FakeEngine -------------------------------------------------------------------------

FakeEngine::FakeEngine(FakeHandler handler) : handler_(std::move(handler)) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listen_fd_, 64) != 0) {
    throw std::runtime_error("fake engine: cannot listen");
  }
  socklen_t len = sizeof addr;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  acceptor_ = std::thread([this] { accept_loop(); });
}

FakeEngine::~FakeEngine() { stop(); }

void FakeEngine::stop() {
  if (stopping_.exchange(true)) return;
  if (acceptor_.joinable()) acceptor_.join();
  ::close(listen_fd_);
  std::vector<std::thread> workers;
  {
    std::lock_guard lock(mu_);
    workers.swap(workers_);
  }
  for (auto& t : workers) t.join();
}

EngineEndpoint FakeEngine::endpoint() const {
  return {.host = "127.0.0.1", .port = port_, .api_key = "", .available = true, .state = "ready"};
}

std::vector<FakeRequest> FakeEngine::requests() {
  std::lock_guard lock(mu_);
  return requests_;
}

size_t FakeEngine::count(const std::string& path) {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const auto& r : requests_) n += r.path == path ? 1u : 0u;
  return n;
}

void FakeEngine::accept_loop() {
  while (!stopping_.load()) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    std::lock_guard lock(mu_);
    workers_.emplace_back([this, fd] { serve(fd); });
  }
}

void FakeEngine::serve(int fd) {
  std::string buf;
  char tmp[8192];
  FakeRequest req;
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  size_t head_end = std::string::npos;
  size_t want = 0;
  while (Clock::now() < deadline && !stopping_.load()) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    const ssize_t n = ::recv(fd, tmp, sizeof tmp, 0);
    if (n <= 0) break;
    buf.append(tmp, static_cast<size_t>(n));
    if (head_end == std::string::npos && (head_end = buf.find("\r\n\r\n")) != std::string::npos) {
      const std::string head = buf.substr(0, head_end);
      const size_t sp1 = head.find(' ');
      const size_t sp2 = head.find(' ', sp1 + 1);
      req.method = head.substr(0, sp1);
      req.path = head.substr(sp1 + 1, sp2 - sp1 - 1);
      std::string lower = head;
      for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      if (auto cl = lower.find("content-length:"); cl != std::string::npos) {
        want = std::strtoull(head.c_str() + cl + 15, nullptr, 10);
      }
    }
    if (head_end != std::string::npos && buf.size() >= head_end + 4 + want) {
      req.body = buf.substr(head_end + 4, want);
      {
        std::lock_guard lock(mu_);
        requests_.push_back(req);
      }
      FakeConnection conn(fd, stopping_);
      handler_(req, conn);
      if (!conn.closed()) conn.abort();
      return;
    }
  }
  ::close(fd);
}

bool FakeEngine::answer_basics(const FakeRequest& r, FakeConnection& c) {
  const std::string path = r.path.substr(0, r.path.find('?'));
  if (path == "/health") {
    c.answer(200, "application/json", R"({"status":"ok"})");
  } else if (path == "/slots") {
    c.answer(200, "application/json", R"([{"id":0,"is_processing":false}])");
  } else if (path == "/metrics") {
    // As an engine started without --metrics answers.
    c.answer(501, "application/json",
             R"({"error":{"code":501,"message":"This server does not support metrics endpoint.","type":"not_supported_error"}})");
  } else if (path == "/props") {
    c.answer(200, "application/json", R"({"default_generation_settings":{"n_ctx":4096},"total_slots":1})");
  } else if (path == "/v1/completions" && r.body.find("\"max_tokens\":1") != std::string::npos) {
    c.answer(
        200, "application/json",
        R"({"choices":[{"text":"a","index":0,"finish_reason":"length"}],"usage":{"prompt_tokens":1,"completion_tokens":1}})");
  } else {
    return false;
  }
  return true;
}

void FakeEngine::answer_chat(const FakeRequest& r, FakeConnection& c, int words) {
  const json body = json::parse(r.body, nullptr, false);
  const bool stream = body.is_object() && body.value("stream", false);
  std::string text;
  for (int i = 0; i < words; ++i) text += i == 0 ? "word" : " word";
  const json usage = {{"prompt_tokens", 10}, {"completion_tokens", words}, {"total_tokens", 10 + words}};
  if (!stream) {
    json answer = {{"id", "chatcmpl-fake"},
                   {"object", "chat.completion"},
                   {"model", "fake"},
                   {"choices", json::array({{{"index", 0},
                                             {"message", {{"role", "assistant"}, {"content", text}}},
                                             {"finish_reason", "stop"}}})},
                   {"usage", usage}};
    c.answer(200, "application/json", answer.dump());
    return;
  }
  c.begin_chunked(200, "text/event-stream");
  auto event = [&](json delta, json finish) {
    json chunk = {
        {"id", "chatcmpl-fake"},
        {"object", "chat.completion.chunk"},
        {"model", "fake"},
        {"choices",
         json::array({{{"index", 0}, {"delta", std::move(delta)}, {"finish_reason", std::move(finish)}}})}};
    c.chunk("data: " + chunk.dump() + "\n\n");
  };
  event({{"role", "assistant"}, {"content", ""}}, nullptr);
  for (int i = 0; i < words; ++i) event({{"content", i == 0 ? "word" : " word"}}, nullptr);
  event(json::object(), "stop");
  c.chunk("data: " +
          json{{"id", "chatcmpl-fake"},
               {"object", "chat.completion.chunk"},
               {"choices", json::array()},
               {"usage", usage}}
              .dump() +
          "\n\n");
  c.chunk("data: [DONE]\n\n");
  c.end_chunked();
}

// ---- RawConnection ----------------------------------------------------------------------

RawConnection::RawConnection(uint16_t port) {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

RawConnection::~RawConnection() {
  if (fd_ >= 0) ::close(fd_);
}

bool RawConnection::send(std::string_view bytes) {
  if (fd_ < 0) return false;
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

size_t RawConnection::send_within(std::string_view bytes, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  size_t sent = 0;
  while (fd_ >= 0 && sent < bytes.size() && Clock::now() < deadline) {
    const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      pollfd p{fd_, POLLOUT, 0};
      ::poll(&p, 1, 20);
      continue;
    }
    break;
  }
  return sent;
}

std::string RawConnection::read_all(std::chrono::milliseconds timeout) {
  std::string out;
  const auto deadline = Clock::now() + timeout;
  char tmp[8192];
  while (fd_ >= 0 && Clock::now() < deadline) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 20) <= 0) continue;
    const ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
    if (n <= 0) break;
    out.append(tmp, static_cast<size_t>(n));
  }
  return out;
}

bool RawConnection::closed_within(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  char tmp[8192];
  while (fd_ >= 0 && Clock::now() < deadline) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 20) <= 0) continue;
    const ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
    if (n <= 0) return true;
  }
  return false;
}

bool RawConnection::closed_now() {
  char tmp[8192];
  while (fd_ >= 0) {
    const ssize_t n = ::recv(fd_, tmp, sizeof tmp, MSG_DONTWAIT);
    if (n > 0) continue;
    return n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
  }
  return true;
}

// ---- stream_request ---------------------------------------------------------------------

StreamOutcome stream_request(uint16_t port, json body,
                             const std::vector<std::pair<std::string, std::string>>& headers,
                             std::chrono::seconds timeout,
                             const std::function<bool(const StreamOutcome&)>& on_event) {
  StreamOutcome out;
  body["stream"] = true;
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(timeout);
  client.set_connection_timeout(std::chrono::seconds(5));
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/chat/completions";
  for (const auto& [k, v] : headers) req.headers.emplace(k, v);
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  SseParser parser;
  const auto t0 = Clock::now();
  bool stopped = false;
  req.response_handler = [&](const httplib::Response& r) {
    out.status = r.status;
    out.retry_after_s = std::atoi(r.get_header_value("Retry-After").c_str());
    return true;
  };
  req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
    out.body.append(data, len);
    if (out.status != 200) return true;
    for (const auto& ev : parser.feed(std::string_view(data, len))) {
      if (ev.comment_only) {
        out.comments.push_back(ev.raw);
        if (on_event && !on_event(out)) {
          stopped = true;
          return false;
        }
        continue;
      }
      if (ev.is_done()) {
        out.done = true;
        continue;
      }
      auto j = json::parse(ev.data, nullptr, false);
      if (j.is_discarded()) continue;
      if (j.contains("error")) out.error = j["error"];
      for (const auto& ch : j.value("choices", json::array())) {
        if (ch.contains("delta") && ch["delta"].contains("content") && ch["delta"]["content"].is_string()) {
          out.content += ch["delta"]["content"].get<std::string>();
          if (out.first_content_ms < 0 && !out.content.empty()) {
            out.first_content_ms = util::ms_since(t0);
          }
        }
      }
      out.chunks.push_back(std::move(j));
      if (on_event && !on_event(out)) {
        stopped = true;
        return false;
      }
    }
    return true;
  };
  auto res = client.send(req);
  out.ms = util::ms_since(t0);
  out.transport_error = !res && !stopped;
  if (res && out.status != 200) {
    auto j = json::parse(out.body, nullptr, false);
    if (!j.is_discarded() && j.contains("error")) out.error = j["error"];
  }
  return out;
}

// ---- records ----------------------------------------------------------------------------

bool long_suite_enabled() {
  const char* v = std::getenv("KVGATE_FAULTS");
  return v != nullptr && std::string(v) == "1";
}

void record_reliability(const std::string& case_id, json record) {
  const char* dir = std::getenv("KVGATE_RELIABILITY_OUT");
  if (dir == nullptr || *dir == '\0') return;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  record["case"] = case_id;
  // The outcome is the test's own: a failed expectation anywhere in it makes the case fail,
  // whatever the record says.
  if (::testing::Test::HasFailure()) {
    record["result"] = "fail";
  } else if (!record.contains("result")) {
    record["result"] = "pass";
  }
  std::ofstream out(std::filesystem::path(dir) / (case_id + ".json"));
  out << record.dump(2) << "\n";
}

uint64_t rss_kib(int pid) {
  std::ifstream status(fmt::format("/proc/{}/status", pid));
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::strtoull(line.c_str() + 6, nullptr, 10);
  }
  return 0;
}

}  // namespace kvgate::testing
