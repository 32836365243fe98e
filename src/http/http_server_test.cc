#include "http/http_server.h"

#include <atomic>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "testing/encoders.h"
#include "util/socket.h"

namespace kvgate::http {
namespace {

int connect_to(uint16_t port) {
  const int fd = util::open_socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(util::native_socket(fd), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    util::close_socket(fd);
    return -1;
  }
  return fd;
}

void send_all(int fd, std::string_view s) {
  ASSERT_EQ(util::send_bytes(fd, s.data(), s.size(), false), static_cast<ssize_t>(s.size()));
}

// Reads until the peer closes or `stop_at` appears or the timeout passes.
std::string read_until(int fd, std::string_view stop_at = {}, int timeout_ms = 5000) {
  std::string out;
  char buf[4096];
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p = util::poll_entry(fd, POLLIN);
    if (util::poll_sockets(&p, 1, 50) <= 0) continue;
    const ssize_t n = util::recv_bytes(fd, buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (!stop_at.empty() && out.find(stop_at) != std::string::npos) break;
  }
  return out;
}

// Polls `done` until it holds or 30 s pass (for failures only: a loaded machine, or a
// sanitizer build, runs the server's threads late); says whether it held.
template <typename F>
bool eventually(F done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
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
  send_all(fd, "POST /a HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3\r\n\r\nabc");
  std::string r1 = read_until(fd, "POST /a abc");
  EXPECT_NE(r1.find("HTTP/1.1 200 OK"), std::string::npos) << r1;
  EXPECT_NE(r1.find("Content-Length: 11"), std::string::npos);
  send_all(fd, "GET /b HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
  std::string r2 = read_until(fd);
  EXPECT_NE(r2.find("GET /b "), std::string::npos) << r2;
  EXPECT_NE(r2.find("Connection: close"), std::string::npos);
  util::close_socket(fd);
}

TEST(HttpServerTest, OversizedBodyIsRefusedBeforeItIsSent) {
  HttpServerOptions o;
  o.max_body_bytes = 10;
  std::atomic<int> calls{0};
  TestServer s(
      [&](const HttpRequest&, ResponseWriter& w) {
        ++calls;
        w.send(200, {}, "x");
      },
      o);
  const int fd = connect_to(s.port());
  send_all(fd,
           "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nExpect: 100-continue\r\nContent-Length: "
           "11\r\n\r\n");
  std::string r = read_until(fd);
  EXPECT_NE(r.find("413 Payload Too Large"), std::string::npos) << r;
  EXPECT_NE(r.find("\"error\""), std::string::npos);
  EXPECT_EQ(r.find("100 Continue"), std::string::npos);
  EXPECT_EQ(calls.load(), 0);
  util::close_socket(fd);
}

TEST(HttpServerTest, ExpectContinueGetsInterimAnswer) {
  TestServer s(echo_handler());
  const int fd = connect_to(s.port());
  send_all(fd, "POST /e HTTP/1.1\r\nHost: localhost\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n");
  std::string interim = read_until(fd, "\r\n\r\n", 2000);
  EXPECT_EQ(interim, "HTTP/1.1 100 Continue\r\n\r\n");
  send_all(fd, "hi");
  EXPECT_NE(read_until(fd, "POST /e hi").find("POST /e hi"), std::string::npos);
  util::close_socket(fd);
}

TEST(HttpServerTest, ChunkedRequestBody) {
  TestServer s(echo_handler());
  const int fd = connect_to(s.port());
  send_all(fd,
           "POST /c HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: "
           "chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n");
  EXPECT_NE(read_until(fd, "POST /c abcde").find("POST /c abcde"), std::string::npos);
  util::close_socket(fd);
}

TEST(HttpServerTest, SlowHeadTimesOut) {
  HttpServerOptions o;
  o.head_timeout = std::chrono::milliseconds(300);
  TestServer s(echo_handler(), o);
  const int fd = connect_to(s.port());
  send_all(fd, "GET / HTTP/1.1\r\nHo");
  const auto start = std::chrono::steady_clock::now();
  std::string r = read_until(fd, {}, 30000);
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_NE(r.find("408"), std::string::npos) << r;
  EXPECT_GE(waited, std::chrono::milliseconds(250));  // at the time-out, not before
  EXPECT_LT(waited, std::chrono::seconds(20));        // and it comes (late on a loaded machine)
  util::close_socket(fd);
}

TEST(HttpServerTest, MalformedRequestGetsJsonError) {
  TestServer s(echo_handler());
  const int fd = connect_to(s.port());
  send_all(fd, "GARBAGE\r\n\r\n");
  std::string r = read_until(fd);
  EXPECT_NE(r.find("400 Bad Request"), std::string::npos) << r;
  EXPECT_NE(r.find("\"invalid_request_error\""), std::string::npos) << r;
  util::close_socket(fd);
}

TEST(HttpServerTest, StreamsChunksAndNoticesClientGone) {
  std::atomic<bool> saw_gone{false};
  std::atomic<bool> done{false};
  TestServer s([&](const HttpRequest&, ResponseWriter& w) {
    w.begin_stream(200, {{"Content-Type", "text/event-stream"}});
    w.write("data: one\n\n");
    for (int i = 0; i < 3000 && !saw_gone; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      if (w.client_gone() || !w.write(": ping\n\n")) saw_gone = true;
    }
    w.end();
    done = true;
  });
  const int fd = connect_to(s.port());
  send_all(fd, "GET /s HTTP/1.1\r\nHost: localhost\r\n\r\n");
  std::string r = read_until(fd, "data: one", 30000);
  EXPECT_NE(r.find("Transfer-Encoding: chunked"), std::string::npos) << r;
  EXPECT_NE(r.find("b\r\ndata: one\n\n\r\n"), std::string::npos) << r;
  util::close_socket(fd);
  EXPECT_TRUE(eventually([&] { return done.load(); }));
  EXPECT_TRUE(saw_gone.load());
}

TEST(HttpServerTest, CompressedBodiesReachTheHandlerDecodedAndWithinTheLimit) {
  HttpServerOptions o;
  o.max_body_bytes = 4096;
  TestServer s(
      [](const HttpRequest& r, ResponseWriter& w) {
        w.send(200, {}, std::string(r.header("content-encoding") ? "encoded:" : "plain:") + r.body);
      },
      o);
  const auto post = [&](std::string_view encoding, const std::string& body) {
    const int fd = connect_to(s.port());
    send_all(fd, "POST /v1/x HTTP/1.1\r\nHost: localhost\r\nContent-Encoding: " + std::string(encoding) +
                     "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" +
                     body);
    std::string r = read_until(fd, {}, 30000);
    util::close_socket(fd);
    return r;
  };
  const std::string json = R"({"messages":[{"role":"user","content":"hi"}]})";
  std::string ok = post("gzip", testing::gzip(json));
  EXPECT_NE(ok.find("200 OK"), std::string::npos) << ok;
  EXPECT_NE(ok.find("plain:" + json), std::string::npos) << ok;
  // 1 MiB of one letter is about 1 KB as gzip: under the limit sent, over it decoded.
  std::string bomb = post("gzip", testing::gzip(std::string(1 << 20, 'a')));
  EXPECT_NE(bomb.find("413"), std::string::npos) << bomb;
  EXPECT_NE(bomb.find("once gzip-decoded"), std::string::npos) << bomb;
  std::string unknown = post("br", json);
  EXPECT_NE(unknown.find("415"), std::string::npos) << unknown;
  std::string corrupt = post("gzip", "not gzip at all");
  EXPECT_NE(corrupt.find("400"), std::string::npos) << corrupt;
  // None of them cost the next request anything.
  EXPECT_NE(post("identity", json).find("plain:" + json), std::string::npos);
  EXPECT_EQ(s.server->body_bytes_in_flight(), 0u);
}

TEST(HttpServerTest, ConnectionLimitAnswers503WhenEveryConnectionIsWorking) {
  HttpServerOptions o;
  o.max_connections = 1;
  std::atomic<bool> release{false};
  std::atomic<bool> working{false};
  TestServer s(
      [&](const HttpRequest&, ResponseWriter& w) {
        working = true;
        eventually([&] { return release.load(); });
        w.send(200, {}, "done");
      },
      o);
  const int first = connect_to(s.port());
  send_all(first, "GET /block HTTP/1.1\r\nHost: localhost\r\n\r\n");
  ASSERT_TRUE(eventually([&] { return working.load(); }));  // accepted and working
  const int second = connect_to(s.port());
  std::string r = read_until(second, {}, 30000);
  EXPECT_NE(r.find("503"), std::string::npos) << r;
  EXPECT_NE(r.find("Retry-After: 2"), std::string::npos);
  release = true;
  EXPECT_NE(read_until(first, "done").find("done"), std::string::npos);
  util::close_socket(first);
  util::close_socket(second);
}

// Sends one request on `fd`, reads the answer and returns how long the server then kept the
// idle connection open (until it closed it; 30 s at most).
std::chrono::steady_clock::duration idle_for(int fd) {
  send_all(fd, "GET /a HTTP/1.1\r\nHost: localhost\r\n\r\n");
  read_until(fd, "GET /a ");
  const auto t = std::chrono::steady_clock::now();
  read_until(fd, {}, 30000);  // until the server closes
  return std::chrono::steady_clock::now() - t;
}

TEST(HttpServerTest, IdleKeepAliveClosesAfterItsTimeoutAndSoonerWhenSlotsAreScarce) {
  HttpServerOptions o;
  o.idle_timeout = std::chrono::milliseconds(1500);
  o.scarce_idle_timeout = std::chrono::milliseconds(200);
  o.max_connections = 8;
  o.max_unauthenticated_connections = 8;
  {
    TestServer s(echo_handler(), o);
    const int fd = connect_to(s.port());
    const auto waited = idle_for(fd);
    util::close_socket(fd);
    EXPECT_GE(waited, std::chrono::milliseconds(1300));  // its time-out, not the scarce one
    EXPECT_LT(waited, std::chrono::seconds(20));         // closed (late on a loaded machine)
  }
  // 6 of 8 connections open: idle ones get the short time-out. (A long regular time-out
  // here, so that only the scarce one can close it before the read gives up.)
  o.idle_timeout = std::chrono::seconds(60);
  TestServer s(echo_handler(), o);
  std::vector<int> others;
  for (int i = 0; i < 5; ++i) others.push_back(connect_to(s.port()));
  const int scarce = connect_to(s.port());
  ASSERT_TRUE(eventually([&] { return s.server->active_connections() >= 6; }));
  EXPECT_LT(idle_for(scarce), std::chrono::seconds(20));
  util::close_socket(scarce);
  for (int f : others) util::close_socket(f);
}

TEST(HttpServerTest, IdleKeepAliveConnectionGivesWayToANewOneAtTheLimit) {
  HttpServerOptions o;
  o.max_connections = 2;
  o.max_unauthenticated_connections = 2;
  o.idle_timeout = std::chrono::seconds(30);
  TestServer s(echo_handler(), o);
  const int a = connect_to(s.port());
  const int b = connect_to(s.port());
  for (int fd : {a, b}) {
    send_all(fd, "GET /k HTTP/1.1\r\nHost: localhost\r\n\r\n");
    ASSERT_NE(read_until(fd, "GET /k ").find("GET /k "), std::string::npos);
  }
  // A connection is idle once its thread has finished the answer and waits for more, a
  // moment after the client has read it; until then it is working and is not closed.
  ASSERT_TRUE(eventually([&] { return s.server->idle_connections() >= 2; }));
  ASSERT_EQ(s.server->idle_connections(), 2u);
  const int c = connect_to(s.port());
  send_all(c, "GET /new HTTP/1.1\r\nHost: localhost\r\n\r\n");
  const std::string r = read_until(c, "GET /new ", 2000);
  EXPECT_NE(r.find("200 OK"), std::string::npos) << r;
  EXPECT_EQ(read_until(a, {}, 1000), "") << "the connection idle longest was closed, silently";
  EXPECT_EQ(s.server->evictions(), 1u);
  for (int fd : {a, b, c}) util::close_socket(fd);
}

HeadVerdict keyed_check(const HttpRequest& head) {
  HeadVerdict v{.authenticated = head.header("authorization") == "Bearer k"};
  if (head.path == "/public") return v;
  if (!v.authenticated) return {.authenticated = false, .status = 401, .headers = {}, .body = "no key"};
  if (head.path != "/echo") return {.authenticated = true, .status = 404, .headers = {}, .body = "no route"};
  return v;
}

TEST(HttpServerTest, HeadCheckRefusesBeforeTheBodyIsRead) {
  HttpServerOptions o;
  o.head_check = keyed_check;
  std::atomic<int> calls{0};
  TestServer s(
      [&](const HttpRequest& r, ResponseWriter& w) {
        ++calls;
        w.send(200, {}, "body=" + r.body);
      },
      o);
  // 401 with a body announced and never sent: answered at once, then closed (not drained).
  int fd = connect_to(s.port());
  send_all(
      fd,
      "POST /echo HTTP/1.1\r\nHost: localhost\r\nExpect: 100-continue\r\nContent-Length: 60000000\r\n\r\n");
  std::string r = read_until(fd, {}, 2000);
  EXPECT_NE(r.find("401"), std::string::npos) << r;
  EXPECT_EQ(r.find("100 Continue"), std::string::npos) << r;
  EXPECT_NE(r.find("Connection: close"), std::string::npos) << r;
  util::close_socket(fd);
  // 404 without a body keeps the connection; the keyed request after it is served.
  fd = connect_to(s.port());
  send_all(fd, "GET /nothing HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer k\r\n\r\n");
  r = read_until(fd, "no route", 2000);
  EXPECT_NE(r.find("404"), std::string::npos) << r;
  EXPECT_NE(r.find("Connection: keep-alive"), std::string::npos) << r;
  send_all(
      fd,
      "POST /echo HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer k\r\nContent-Length: 3\r\n\r\nabc");
  EXPECT_NE(read_until(fd, "body=abc", 2000).find("body=abc"), std::string::npos);
  util::close_socket(fd);
  // A public route without a key is served, but a body sent to it without the key is not read.
  fd = connect_to(s.port());
  send_all(fd, "GET /public HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1000000\r\n\r\n");
  r = read_until(fd, {}, 2000);
  EXPECT_NE(r.find("401"), std::string::npos) << r;
  util::close_socket(fd);
  EXPECT_EQ(calls.load(), 1);
}

TEST(HttpServerTest, BodiesInFlightShareOneBudget) {
  HttpServerOptions o;
  o.max_body_bytes = 600;
  o.max_body_bytes_in_flight = 1000;
  TestServer s(echo_handler(), o);
  const int first = connect_to(s.port());
  send_all(first,
           "POST /a HTTP/1.1\r\nHost: localhost\r\nContent-Length: 600\r\n\r\n" + std::string(100, 'a'));
  ASSERT_TRUE(eventually([&] { return s.server->body_bytes_in_flight() >= 600; }));  // its 600 bytes are held
  const int second = connect_to(s.port());
  send_all(second, "POST /b HTTP/1.1\r\nHost: localhost\r\nContent-Length: 600\r\n\r\n");
  const std::string r = read_until(second, {}, 2000);
  EXPECT_NE(r.find("503"), std::string::npos) << r;
  EXPECT_NE(r.find("Retry-After"), std::string::npos) << r;
  EXPECT_NE(r.find("budget of 1000 bytes"), std::string::npos) << r;
  util::close_socket(second);
  send_all(first, std::string(500, 'a'));
  EXPECT_NE(read_until(first, "POST /a a").find("200 OK"), std::string::npos);
  EXPECT_TRUE(eventually([&] { return s.server->body_bytes_in_flight() == 0; }));
  const int third = connect_to(s.port());  // the budget is back
  send_all(third,
           "POST /c HTTP/1.1\r\nHost: localhost\r\nContent-Length: 600\r\n\r\n" + std::string(600, 'c'));
  EXPECT_NE(read_until(third, "POST /c c").find("200 OK"), std::string::npos);
  util::close_socket(first);
  util::close_socket(third);
}

TEST(HttpServerTest, ChunkExtensionsTrickledFastAreTimedOutByThePayloadRate) {
  HttpServerOptions o;
  o.min_body_bytes_per_s = 1000;
  o.body_grace = std::chrono::milliseconds(300);
  TestServer s(echo_handler(), o);
  const int fd = connect_to(s.port());
  send_all(fd, "POST /x HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n");
  // ~40 KiB/s of framing carrying 40 payload bytes a second.
  const std::string chunk = "1;" + std::string(1000, 'e') + "\r\nx\r\n";
  std::string r;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 150 && r.empty(); ++i) {
    if (util::send_bytes(fd, chunk.data(), chunk.size(), false) < 0) break;
    r = read_until(fd, "\r\n\r\n", 25);
  }
  if (r.empty()) r = read_until(fd, "\r\n\r\n", 10000);
  EXPECT_NE(r.find("408"), std::string::npos) << r;
  // Timed out by the payload rate, while the framing still flowed (a loaded machine runs late).
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(15));
  util::close_socket(fd);
}

TEST(HttpServerTest, ChunkedTrailersOverTheHeadLimitGet431) {
  HttpServerOptions o;
  o.head_limits.max_head_bytes = 1024;
  TestServer s(echo_handler(), o);
  const int fd = connect_to(s.port());
  std::string req =
      "POST /t HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\n";
  for (int i = 0; i < 40; ++i) req += "X-Trailer: " + std::string(40, 'v') + "\r\n";
  send_all(fd, req + "\r\n");
  const std::string r = read_until(fd, {}, 2000);
  EXPECT_NE(r.find("431"), std::string::npos) << r;
  util::close_socket(fd);
}

TEST(HttpServerTest, TlsHelloIsAnswered400AtOnce) {
  TestServer s(echo_handler());
  const int fd = connect_to(s.port());
  static constexpr char kHello[] = "\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03";
  send_all(fd, std::string_view(kHello, sizeof kHello - 1));
  const auto start = std::chrono::steady_clock::now();
  const std::string r = read_until(fd, {}, 3000);
  EXPECT_NE(r.find("400 Bad Request"), std::string::npos) << r;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  util::close_socket(fd);
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
}  // namespace kvgate::http
