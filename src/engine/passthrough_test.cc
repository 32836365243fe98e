// The pass-through against an in-process stand-in upstream (a small httplib server); the
// real engine behind it is exercised by cli/up_e2e_test.cc.
#include "engine/passthrough.h"

#include <future>

#include <gtest/gtest.h>
#include <httplib.h>

#include "util/net.h"

namespace kvgate::engine {
namespace {

class Upstream {
 public:
  Upstream() {
    server_.Get("/health", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"status":"ok"})", "application/json");
    });
    server_.Post("/v1/echo", [this](const httplib::Request& req, httplib::Response& res) {
      {
        std::lock_guard lock(mu_);
        last_auth_ = req.get_header_value("Authorization");
        last_target_ = req.target;
      }
      res.set_content(req.body, "application/json");
    });
    server_.Post("/v1/fail", [](const httplib::Request&, httplib::Response& res) {
      res.status = 500;
      res.set_content(R"({"error":{"message":"Invalid input batch"}})", "application/json");
    });
    server_.Post("/v1/stream", [this](const httplib::Request&, httplib::Response& res) {
      res.set_chunked_content_provider("text/event-stream", [this](size_t, httplib::DataSink& sink) {
        std::string first = "data: one\n\n";
        sink.write(first.data(), first.size());
        // The second event only after the client has seen the first: proves it is relayed
        // as it arrives, not buffered.
        if (first_seen_.wait_for(std::chrono::seconds(10)) != std::future_status::ready) return false;
        std::string rest = "data: two\n\ndata: [DONE]\n\n";
        sink.write(rest.data(), rest.size());
        sink.done();
        return true;
      });
    });
    port_ = static_cast<uint16_t>(server_.bind_to_any_port("127.0.0.1"));
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~Upstream() {
    server_.stop();
    thread_.join();
  }
  EngineEndpoint endpoint() const { return {"127.0.0.1", port_, "engine-key"}; }
  std::string last_auth() {
    std::lock_guard lock(mu_);
    return last_auth_;
  }
  std::string last_target() {
    std::lock_guard lock(mu_);
    return last_target_;
  }
  std::promise<void> first_seen_promise;
  std::shared_future<void> first_seen_ = first_seen_promise.get_future().share();

 private:
  httplib::Server server_;
  uint16_t port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::string last_auth_;
  std::string last_target_;
};

class PassthroughTest : public ::testing::Test {
 protected:
  void start(std::string api_key = "", size_t max_body = 1 << 20) {
    auto port = util::pick_free_port();
    ASSERT_TRUE(port.ok());
    auto p = Passthrough::bind(
        {.host = "127.0.0.1", .port = *port, .api_key = api_key, .max_body_bytes = max_body},
        [this](std::string* why) -> std::optional<EngineEndpoint> {
          if (!serving_) {
            *why = "it is restarting";
            return std::nullopt;
          }
          std::lock_guard lock(mu_);
          return target_;
        },
        [this](const std::string& what) {
          std::lock_guard lock(mu_);
          failures_.push_back(what);
        });
    ASSERT_TRUE(p.ok()) << p.error().message();
    pass_ = std::move(*p);
    pass_->start();
    client_ = std::make_unique<httplib::Client>("127.0.0.1", *port);
    client_->set_read_timeout(std::chrono::seconds(10));
    port_ = *port;
  }
  std::vector<std::string> failures() {
    std::lock_guard lock(mu_);
    return failures_;
  }

  Upstream upstream_;
  std::atomic<bool> serving_{true};
  EngineEndpoint target_ = upstream_.endpoint();
  std::unique_ptr<Passthrough> pass_;
  std::unique_ptr<httplib::Client> client_;
  uint16_t port_ = 0;
  std::mutex mu_;
  std::vector<std::string> failures_;
};

TEST_F(PassthroughTest, ForwardsWithTheEngineKeyAndChecksTheClientKey) {
  start("client-key");
  auto res = client_->Post("/v1/echo?x=1", {{"Authorization", "Bearer client-key"}}, R"({"a":1})",
                           "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, R"({"a":1})");
  EXPECT_EQ(upstream_.last_auth(), "Bearer engine-key");  // the client's key never reaches the engine
  EXPECT_EQ(upstream_.last_target(), "/v1/echo?x=1");
  res = client_->Post("/v1/echo", {{"x-api-key", "client-key"}}, "{}", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  for (auto bad : {"Bearer client-kez", "Bearer client-key2", "Bearer ", "client-key"}) {
    res = client_->Post("/v1/echo", {{"Authorization", bad}}, "{}", "application/json");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 401) << bad;
  }
  res = client_->Post("/v1/echo", "{}", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 401);
  res = client_->Get("/health");  // public
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, R"({"status":"ok"})");
}

TEST_F(PassthroughTest, StreamsAsItArrives) {
  start();
  std::vector<std::string> chunks;
  std::string content_type;
  std::string buffering;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/stream";
  req.body = "{}";
  req.headers = {{"Content-Type", "application/json"}};
  req.response_handler = [&](const httplib::Response& r) {
    content_type = r.get_header_value("Content-Type");
    buffering = r.get_header_value("X-Accel-Buffering");
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    chunks.emplace_back(data, n);
    if (chunks.size() == 1) upstream_.first_seen_promise.set_value();
    return true;
  };
  auto res = client_->send(req);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(content_type, "text/event-stream");
  EXPECT_EQ(buffering, "no");
  std::string all;
  for (const auto& c : chunks) all += c;
  EXPECT_EQ(all, "data: one\n\ndata: two\n\ndata: [DONE]\n\n");
  ASSERT_GE(chunks.size(), 2u);
  EXPECT_EQ(chunks[0], "data: one\n\n");
}

TEST_F(PassthroughTest, EngineNotServing) {
  start();
  serving_ = false;
  auto res = client_->Post("/v1/echo", "{}", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503);
  EXPECT_EQ(res->get_header_value("Retry-After"), "5");
  EXPECT_NE(res->body.find("the engine is not serving: it is restarting"), std::string::npos) << res->body;
  EXPECT_TRUE(failures().empty());
}

TEST_F(PassthroughTest, UpstreamErrorsAreRelayedAndReported) {
  start();
  auto res = client_->Post("/v1/fail", "{}", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 500);
  EXPECT_NE(res->body.find("Invalid input batch"), std::string::npos);
  ASSERT_EQ(failures().size(), 1u);
  EXPECT_EQ(failures()[0], "POST /v1/fail: HTTP 500");

  auto closed = util::pick_free_port();  // nothing listens there
  ASSERT_TRUE(closed.ok());
  {
    std::lock_guard lock(mu_);
    target_ = {"127.0.0.1", *closed, "k"};
  }
  res = client_->Post("/v1/echo", "{}", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 502);
  ASSERT_EQ(failures().size(), 2u);
  EXPECT_NE(failures()[1].find("POST /v1/echo: no answer from the engine"), std::string::npos)
      << failures()[1];
}

TEST_F(PassthroughTest, LimitsAndRoutes) {
  start("", 1024);
  auto res = client_->Post("/v1/echo", std::string(4096, 'x'), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 413);
  res = client_->Get("/slots");  // not forwarded
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
}

TEST_F(PassthroughTest, AnAddressInUseIsAnErrorNotAnotherPort) {
  start();
  auto second = Passthrough::bind({.host = "127.0.0.1", .port = port_}, nullptr, nullptr);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.error().message().find("cannot listen on 127.0.0.1:" + std::to_string(port_)),
            std::string::npos)
      << second.error().message();
  auto open = Passthrough::bind({.host = "0.0.0.0", .port = port_}, nullptr, nullptr);
  ASSERT_FALSE(open.ok());
  EXPECT_NE(open.error().message().find("requires an API key"), std::string::npos);
}

TEST(ConstantTimeEqualTest, Compares) {
  EXPECT_TRUE(constant_time_equal("abc", "abc"));
  EXPECT_FALSE(constant_time_equal("abc", "abd"));
  EXPECT_FALSE(constant_time_equal("abc", "abcd"));
  EXPECT_FALSE(constant_time_equal("", "a"));
  EXPECT_TRUE(constant_time_equal("", ""));
}

}  // namespace
}  // namespace kvgate::engine
