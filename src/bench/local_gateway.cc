#include "bench/local_gateway.h"

#include <thread>

namespace kvgate::bench {

Result<std::unique_ptr<LocalGateway>> LocalGateway::start(const Endpoint& engine,
                                                          LocalGatewayOptions options) {
  auto address = std::make_shared<EngineAddress>();
  address->endpoint = engine;
  auto upstream = std::make_shared<gateway::HttpUpstream>([address] {
    std::lock_guard lock(address->mu);
    const Endpoint& e = address->endpoint;
    return gateway::EngineEndpoint{.host = e.host, .port = e.port, .api_key = e.api_key};
  });
  KV_ASSIGN_OR_RETURN(auto g, start(std::move(upstream), std::move(options)));
  g->engine_ = std::move(address);
  return g;
}

Result<std::unique_ptr<LocalGateway>> LocalGateway::start(std::shared_ptr<gateway::Upstream> upstream,
                                                          LocalGatewayOptions options) {
  std::unique_ptr<LocalGateway> g(new LocalGateway());
  g->api_key_ = options.gateway.api_keys.empty() ? std::string() : options.gateway.api_keys.front();
  g->gateway_ = std::make_unique<gateway::Gateway>(std::move(options.gateway), std::move(upstream));
  if (options.store) {
    std::error_code ec;
    if (options.remove_store) {
      for (const char* suffix : {"", "-wal", "-shm"})
        std::filesystem::remove(options.store->string() + suffix, ec);
      g->store_to_remove_ = options.store;
    }
    KV_TRY(g->gateway_->open_store(*options.store).with_context("opening the gateway's session store"));
  }
  if (g->gateway_->options().kv.enabled()) {
    KV_TRY(g->gateway_->open_kv_states().with_context("opening the gateway's saved conversation states"));
  }
  http::HttpServerOptions http;
  http.host = "127.0.0.1";
  http.port = 0;
  gateway::Gateway* raw = g->gateway_.get();
  http.head_check = [raw](const http::HttpRequest& head) { return raw->check_head(head); };
  g->server_ = std::make_unique<http::HttpServer>(
      http, [raw](const http::HttpRequest& r, http::ResponseWriter& w) { raw->handle(r, w); });
  KV_TRY(g->server_->start().with_context("starting the gateway's HTTP server"));
  return g;
}

LocalGateway::~LocalGateway() {
  if (server_) server_->stop();
  gateway_.reset();
  if (store_to_remove_) {
    std::error_code ec;
    for (const char* suffix : {"", "-wal", "-shm"})
      std::filesystem::remove(store_to_remove_->string() + suffix, ec);
  }
}

void LocalGateway::engine_restarted(const Endpoint& engine) {
  {
    std::lock_guard lock(engine_->mu);
    engine_->endpoint = engine;
  }
  gateway_->on_engine_restart();
}

bool LocalGateway::wait_idle(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto s = gateway_->admission().stats();
    if (s.active == 0 && s.waiting == 0) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

Endpoint LocalGateway::endpoint() const {
  return {.host = "127.0.0.1", .port = server_->port(), .api_key = api_key_};
}

}  // namespace kvgate::bench
