#include "testing/filtering_proxy.h"

#include <chrono>

#include <httplib.h>

namespace kvgate::testing {

FilteringProxy::FilteringProxy(uint16_t target_port, std::set<std::string> blocked)
    : target_port_(target_port), blocked_(std::move(blocked)), server_(std::make_unique<httplib::Server>()) {
  auto handler = [this](const httplib::Request& req, httplib::Response& res) {
    {
      std::lock_guard lock(mu_);
      ++hits_[req.path];
    }
    if (blocked_.contains(req.path)) {
      res.status = 404;
      res.set_content(R"({"error":{"code":404,"message":"Not Found","type":"not_found_error"}})",
                      "application/json");
      return;
    }
    httplib::Client c("127.0.0.1", target_port_);
    c.set_read_timeout(600, 0);
    httplib::Headers headers;
    if (req.has_header("Authorization"))
      headers.emplace("Authorization", req.get_header_value("Authorization"));
    std::string target = req.path;
    if (!req.params.empty()) target = httplib::append_query_params(req.path, req.params);
    const std::string type = req.get_header_value("Content-Type");
    auto r = req.method == "GET"
                 ? c.Get(target, headers)
                 : c.Post(target, headers, req.body, type.empty() ? "application/json" : type);
    if (!r) {
      res.status = 502;
      res.set_content(httplib::to_string(r.error()), "text/plain");
      return;
    }
    res.status = r->status;
    const std::string content_type = r->get_header_value("Content-Type");
    res.set_content(r->body, content_type.empty() ? "application/json" : content_type);
  };
  server_->Get(".*", handler);
  server_->Post(".*", handler);
  const int port = server_->bind_to_any_port("127.0.0.1");
  port_ = port > 0 ? static_cast<uint16_t>(port) : 0;
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  // Bound and listening already (connections wait in the backlog); wait for the loop anyway.
  for (int i = 0; i < 1000 && !server_->is_running(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

FilteringProxy::~FilteringProxy() {
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

int FilteringProxy::hits(const std::string& path) const {
  std::lock_guard lock(mu_);
  auto it = hits_.find(path);
  return it == hits_.end() ? 0 : it->second;
}

}  // namespace kvgate::testing
