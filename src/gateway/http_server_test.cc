#include "gateway/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

namespace kvgate::gateway {
namespace {

int connect_to(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

void send_all(int fd, std::string_view s) { ASSERT_EQ(::send(fd, s.data(), s.size(), MSG_NOSIGNAL), static_cast<ssize_t>(s.size())); }

// Reads until the peer closes or `stop_at` appears or the timeout passes.
std::string read_until(int fd, std::string_view stop_at = {}, int timeout_ms = 5000) {
  std::string out;
  char buf[4096];
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (!stop_at.empty() && out.find(stop_at) != std::string::npos) break;
  }
  return out;
}

struct TestServer {
  explicit TestServer(Handler h, HttpServerOptions o = {}) {
    o.port = 0;
    server = std::make_unique<HttpServer>(o, std::move(h));
    auto st = server->start();
    EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message());
  }
  std::unique_ptr<HttpServer> server;
  uint16_t port() const { return server->port(); }
};

Handler echo_handler() {
  return [](const HttpRequest& r, ResponseWriter& w) {
    w.send(200, {{"Content-Type", "text/plain"}}, r.method + " " + r.path + " " + r.body);
  };
}

TEST(HttpServerTest, KeepAliveServesSeveralRequestsOnOneConnection) {
  TestServer s(echo_handler());
  const int fd = connect_to(s.port());
  ASSERT_GE(fd, 0);
  send_all(fd, "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc");
  std::string r1 = read_until(fd, "POST /a abc");
  EXPECT_NE(r1.find("HTTP/1.1 200 OK"), std::string::npos) << r1;
  EXPECT_NE(r1.find("Content-Length: 11"), std::string::npos);
  send_all(fd, "GET /b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  std::string r2 = read_until(fd);
  EXPECT_NE(r2.find("GET /b "), std::string::npos) << r2;
  EXPECT_NE(r2.find("Connection: close"), std::string::npos);
  ::close(fd);
}

TEST(HttpServerTest, OversizedBodyIsRefusedBeforeItIsSent) {
  HttpServerOptions o;
  o.max_body_bytes = 10;
  std::atomic<int> calls{0};
  TestServer s([&](const HttpRequest&, ResponseWriter& w) { ++calls; w.send(200, {}, "x"); }, o);
  const int fd = connect_to(s.port());
  send_all(fd, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 11\r\n\r\n");
  std::string r = read_until(fd);
  EXPECT_NE(r.find("413 Payload Too Large"), std::string::npos) << r;
  EXPECT_NE(r.find("\"error\""), std::string::npos);
  EXPECT_EQ(r.find("100 Continue"), std::string::npos);
  EXPECT_EQ(calls.load(), 0);
  ::close(fd);
}

TEST(HttpServerTest, ExpectContinueGetsInterimAnswer) {
  TestServer s(echo_handler());
  const int fd = connect_to(s.port());
  send_all(fd, "POST /e HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n");
  std::string interim = read_until(fd, "\r\n\r\n", 2000);
  EXPECT_EQ(interim, "HTTP/1.1 100 Continue\r\n\r\n");
  send_all(fd, "hi");
  EXPECT_NE(read_until(fd, "POST /e hi").find("POST /e hi"), std::string::npos);
  ::close(fd);
}

TEST(HttpServerTest, ChunkedRequestBody) {
  TestServer s(echo_handler());
  const int fd = connect_to(s.port());
  send_all(fd, "POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n");
  EXPECT_NE(read_until(fd, "POST /c abcde").find("POST /c abcde"), std::string::npos);
  ::close(fd);
}

TEST(HttpServerTest, SlowHeadTimesOut) {
  HttpServerOptions o;
  o.head_timeout = std::chrono::milliseconds(300);
  TestServer s(echo_handler(), o);
  const int fd = connect_to(s.port());
  send_all(fd, "GET / HTTP/1.1\r\nHo");
  const auto start = std::chrono::steady_clock::now();
  std::string r = read_until(fd, {}, 5000);
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_NE(r.find("408"), std::string::npos) << r;
  EXPECT_LT(waited, std::chrono::seconds(3));
  ::close(fd);
}

TEST(HttpServerTest, MalformedRequestGetsJsonError) {
  TestServer s(echo_handler());
  const int fd = connect_to(s.port());
  send_all(fd, "GARBAGE\r\n\r\n");
  std::string r = read_until(fd);
  EXPECT_NE(r.find("400 Bad Request"), std::string::npos) << r;
  EXPECT_NE(r.find("\"invalid_request_error\""), std::string::npos) << r;
  ::close(fd);
}

TEST(HttpServerTest, StreamsChunksAndNoticesClientGone) {
  std::atomic<bool> saw_gone{false};
  std::atomic<bool> done{false};
  TestServer s([&](const HttpRequest&, ResponseWriter& w) {
    w.begin_stream(200, {{"Content-Type", "text/event-stream"}});
    w.write("data: one\n\n");
    for (int i = 0; i < 300 && !saw_gone; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      if (w.client_gone() || !w.write(": ping\n\n")) saw_gone = true;
    }
    w.end();
    done = true;
  });
  const int fd = connect_to(s.port());
  send_all(fd, "GET /s HTTP/1.1\r\nHost: x\r\n\r\n");
  std::string r = read_until(fd, "data: one", 3000);
  EXPECT_NE(r.find("Transfer-Encoding: chunked"), std::string::npos) << r;
  EXPECT_NE(r.find("b\r\ndata: one\n\n\r\n"), std::string::npos) << r;
  ::close(fd);
  for (int i = 0; i < 300 && !done; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(saw_gone.load());
}

TEST(HttpServerTest, ConnectionLimitAnswers503) {
  HttpServerOptions o;
  o.max_connections = 1;
  TestServer s(echo_handler(), o);
  const int first = connect_to(s.port());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // accepted and held (idle)
  const int second = connect_to(s.port());
  std::string r = read_until(second);
  EXPECT_NE(r.find("503"), std::string::npos) << r;
  EXPECT_NE(r.find("Retry-After: 2"), std::string::npos);
  ::close(first);
  ::close(second);
}

TEST(HttpServerTest, PortInUseIsAClearError) {
  TestServer a(echo_handler());
  HttpServerOptions o;
  o.port = a.port();
  HttpServer b(o, echo_handler());
  auto st = b.start();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("already in use"), std::string::npos);
}

}  // namespace
}  // namespace kvgate::gateway
