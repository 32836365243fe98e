#include "gateway/upstream.h"

#include <httplib.h>

#include <fmt/format.h>

namespace kvgate::gateway {
namespace {

std::unique_ptr<httplib::Client> make_client(const EngineEndpoint& ep, std::chrono::milliseconds read_timeout) {
  auto client = std::make_unique<httplib::Client>(ep.host, ep.port);
  client->set_connection_timeout(std::chrono::seconds(5));
  client->set_read_timeout(std::chrono::duration_cast<std::chrono::seconds>(read_timeout) + std::chrono::seconds(1));
  client->set_write_timeout(std::chrono::seconds(60));
  client->set_keep_alive(false);
  return client;
}

httplib::Headers headers_for(const EngineEndpoint& ep) {
  httplib::Headers h;
  if (!ep.api_key.empty()) h.emplace("Authorization", "Bearer " + ep.api_key);
  return h;
}

UpstreamError failure(httplib::Error err, const EngineEndpoint& ep, const CancelScope* cancel) {
  if (cancel != nullptr && cancel->cancelled()) return {UpstreamFailure::kCancelled, "the request was cancelled", 0};
  switch (err) {
    case httplib::Error::Connection:
      return {UpstreamFailure::kConnect,
              fmt::format("cannot connect to the engine at {}:{} (is it running?)", ep.host, ep.port), 2};
    case httplib::Error::Read:
      return {UpstreamFailure::kTimeout, "the engine did not answer in time or closed the connection", 0};
    case httplib::Error::Canceled:
      return {UpstreamFailure::kCancelled, "the request was cancelled", 0};
    default:
      return {UpstreamFailure::kBroken, "engine connection failed: " + httplib::to_string(err), 0};
  }
}

UpstreamError unavailable(const EngineEndpoint& ep) {
  return {UpstreamFailure::kUnavailable, fmt::format("the engine is not available ({})", ep.state), ep.retry_after_s};
}

}  // namespace

void CancelScope::cancel() {
  cancelled_ = true;
  std::lock_guard lock(mu_);
  if (client_ != nullptr) client_->stop();
}

void CancelScope::attach(httplib::Client* client) {
  std::lock_guard lock(mu_);
  client_ = client;
  if (cancelled_) client_->stop();
}

void CancelScope::detach() {
  std::lock_guard lock(mu_);
  client_ = nullptr;
}

std::variant<UpstreamResponse, UpstreamError> HttpUpstream::call(const std::string& method, const std::string& path,
                                                                 const std::string& body,
                                                                 std::chrono::milliseconds timeout,
                                                                 CancelScope* cancel) {
  const EngineEndpoint ep = provider_();
  if (!ep.available) return unavailable(ep);
  auto client = make_client(ep, timeout);
  if (cancel != nullptr) cancel->attach(client.get());
  httplib::Result res = method == "GET" ? client->Get(path.c_str(), headers_for(ep))
                                        : client->Post(path.c_str(), headers_for(ep), body, "application/json");
  if (cancel != nullptr) cancel->detach();
  if (!res) return failure(res.error(), ep, cancel);
  return UpstreamResponse{res->status, std::move(res->body), res->get_header_value("Content-Type")};
}

std::variant<int, UpstreamError> HttpUpstream::stream(const std::string& path, const std::string& body,
                                                      const StreamHandlers& handlers,
                                                      std::chrono::milliseconds idle_timeout, CancelScope* cancel) {
  const EngineEndpoint ep = provider_();
  if (!ep.available) return unavailable(ep);
  auto client = make_client(ep, idle_timeout);
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.headers = headers_for(ep);
  req.headers.emplace("Accept", "text/event-stream");
  req.body = body;
  req.set_header("Content-Type", "application/json");
  int status = 0;
  bool stopped_by_us = false;
  req.response_handler = [&](const httplib::Response& r) {
    status = r.status;
    if (handlers.on_start && !handlers.on_start(r.status, r.get_header_value("Content-Type"))) {
      stopped_by_us = true;
      return false;
    }
    return true;
  };
  req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
    if (handlers.on_data && !handlers.on_data(std::string_view(data, len))) {
      stopped_by_us = true;
      return false;
    }
    return true;
  };
  if (cancel != nullptr) cancel->attach(client.get());
  httplib::Result res = client->send(req);
  if (cancel != nullptr) cancel->detach();
  if (!res) {
    if (stopped_by_us && (cancel == nullptr || !cancel->cancelled())) return status;
    return failure(res.error(), ep, cancel);
  }
  return res->status;
}

}  // namespace kvgate::gateway
