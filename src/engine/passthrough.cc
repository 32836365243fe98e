#include "engine/passthrough.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>

#include <fmt/format.h>
#include <httplib.h>
#include <nlohmann/json.hpp>
#include <sys/socket.h>

#include "util/net.h"

namespace kvgate::engine {
namespace {

constexpr size_t kMaxQueuedBytes = 4u << 20;  // upstream data waiting for a slow client

void send_error(httplib::Response& res, int status, std::string_view type, const std::string& message) {
  const nlohmann::json body = {{"error", {{"code", status}, {"type", type}, {"message", message}}}};
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

// One upstream exchange, shared by the handler, the content provider and the worker thread.
struct Relay {
  std::mutex mu;
  std::condition_variable cv;
  bool headers = false;  // guarded by mu: status/content_type are set (or the exchange failed)
  int status = 0;
  std::string content_type;
  std::deque<std::string> chunks;
  size_t queued = 0;
  bool done = false;
  bool cancelled = false;
  std::string error;

  void cancel() {
    std::lock_guard lock(mu);
    cancelled = true;
    cv.notify_all();
  }
};

void run_upstream(Relay& relay, const EngineEndpoint& ep, httplib::Request request, Millis timeout) {
  httplib::Client client(ep.host, ep.port);
  client.set_connection_timeout(std::chrono::seconds(5));
  client.set_read_timeout(timeout);
  client.set_write_timeout(timeout);
  request.response_handler = [&](const httplib::Response& res) {
    std::lock_guard lock(relay.mu);
    relay.status = res.status;
    relay.content_type = res.get_header_value("Content-Type");
    relay.headers = true;
    relay.cv.notify_all();
    return !relay.cancelled;
  };
  request.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    std::unique_lock lock(relay.mu);
    relay.cv.wait(lock, [&] { return relay.cancelled || relay.queued < kMaxQueuedBytes; });
    if (relay.cancelled) return false;
    relay.chunks.emplace_back(data, n);
    relay.queued += n;
    relay.cv.notify_all();
    return true;
  };
  auto result = client.send(request);
  std::lock_guard lock(relay.mu);
  if (!result && !relay.headers) relay.error = httplib::to_string(result.error());
  relay.headers = true;
  relay.done = true;
  relay.cv.notify_all();
}

std::optional<std::string> client_key(const httplib::Request& req) {
  const std::string auth = req.get_header_value("Authorization");
  if (auth.size() > 7 && (auth.compare(0, 7, "Bearer ") == 0 || auth.compare(0, 7, "bearer ") == 0)) {
    return auth.substr(7);
  }
  if (req.has_header("x-api-key")) return req.get_header_value("x-api-key");
  return std::nullopt;
}

}  // namespace

bool constant_time_equal(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const auto x = static_cast<unsigned char>(i < a.size() ? a[i] : 0);
    const auto y = static_cast<unsigned char>(i < b.size() ? b[i] : 0);
    diff = static_cast<unsigned char>(diff | (x ^ y));
  }
  return diff == 0;
}

Result<std::unique_ptr<Passthrough>> Passthrough::bind(PassthroughOptions options, Target target,
                                                       FailureReport on_upstream_failure) {
  if (!util::is_loopback_host(options.host) && options.api_key.empty()) {
    return Error(fmt::format("listening on {} (not loopback) requires an API key (--api-key)", options.host));
  }
  std::unique_ptr<Passthrough> p(new Passthrough());
  p->options_ = std::move(options);
  p->target_ = std::move(target);
  p->on_failure_ = std::move(on_upstream_failure);
  p->server_ = std::make_unique<httplib::Server>();
  // SO_REUSEADDR only: httplib's default adds SO_REUSEPORT, which would let a second
  // process share the port silently.
  p->server_->set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  p->server_->set_payload_max_length(p->options_.max_body_bytes);
  // Idle keep-alive connections hold a worker until this passes, also when stopping.
  p->server_->set_keep_alive_timeout(2);
  p->install_routes();
  if (!p->server_->bind_to_port(p->options_.host, p->options_.port)) {
    return Error(
        fmt::format("cannot listen on {}:{}: the address is in use or not available here; choose another "
                    "--listen",
                    p->options_.host, p->options_.port));
  }
  return p;
}

Passthrough::~Passthrough() { stop(); }

void Passthrough::start() {
  thread_ = std::thread([this] {
    server_->listen_after_bind();
    ended_ = true;
  });
  // httplib's stop() is a no-op until the accept loop runs: wait for it, so that an early
  // stop() cannot leave the loop running forever.
  while (!server_->is_running() && !ended_) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void Passthrough::stop() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

std::string Passthrough::url() const { return fmt::format("http://{}:{}", options_.host, options_.port); }

void Passthrough::install_routes() {
  auto forward = [this](const httplib::Request& req, httplib::Response& res) {
    const bool is_health = req.path == "/health";
    if (!is_health && !options_.api_key.empty()) {
      auto key = client_key(req);
      if (!key || !constant_time_equal(*key, options_.api_key)) {
        return send_error(res, 401, "authentication_error", "invalid or missing API key");
      }
    }
    std::string why;
    const auto ep = target_(&why);
    if (!ep) {
      res.set_header("Retry-After", "5");
      return send_error(res, 503, "unavailable_error", "the engine is not serving: " + why);
    }
    httplib::Request up;
    up.method = req.method;
    up.path = req.target.empty() ? req.path : req.target;
    up.body = req.body;
    for (const char* h : {"Content-Type", "Accept"}) {
      if (req.has_header(h)) up.headers.emplace(h, req.get_header_value(h));
    }
    if (!ep->api_key.empty()) up.headers.emplace("Authorization", "Bearer " + ep->api_key);

    auto relay = std::make_shared<Relay>();
    // The worker owns a reference: it may outlive this handler (a client that disconnected
    // during a long prefill) until the engine's next byte or its time-out ends the exchange.
    std::thread([relay, target = *ep, up = std::move(up), timeout = options_.upstream_timeout]() mutable {
      run_upstream(*relay, target, std::move(up), timeout);
    }).detach();
    int status = 0;
    std::string type;
    std::string error;
    {
      std::unique_lock lock(relay->mu);
      relay->cv.wait(lock, [&] { return relay->headers; });
      status = relay->status;
      type = relay->content_type.empty() ? "application/octet-stream" : relay->content_type;
      error = relay->error;
    }
    const std::string what = fmt::format("{} {}", req.method, req.path);
    if (status == 0) {
      on_failure_(fmt::format("{}: no answer from the engine ({})", what, error));
      return send_error(res, 502, "unavailable_error", "the engine did not answer: " + error);
    }
    if (status >= 500) on_failure_(fmt::format("{}: HTTP {}", what, status));
    res.status = status;
    if (type.rfind("text/event-stream", 0) == 0) {
      res.set_header("Cache-Control", "no-cache");
      res.set_header("X-Accel-Buffering", "no");
    }
    res.set_chunked_content_provider(
        type,
        [relay](size_t, httplib::DataSink& sink) {
          std::unique_lock lock(relay->mu);
          relay->cv.wait(lock, [&] { return !relay->chunks.empty() || relay->done; });
          if (relay->chunks.empty()) {
            sink.done();
            return true;
          }
          std::string chunk = std::move(relay->chunks.front());
          relay->chunks.pop_front();
          relay->queued -= chunk.size();
          relay->cv.notify_all();
          lock.unlock();
          if (!sink.write(chunk.data(), chunk.size())) {
            relay->cancel();  // the client went away: stop the engine's work too
            return false;
          }
          return true;
        },
        [relay](bool) { relay->cancel(); });
  };
  server_->Get("/health", forward);
  server_->Get(R"(/v1/.*)", forward);
  server_->Post(R"(/v1/.*)", forward);
  server_->Delete(R"(/v1/.*)", forward);
}

}  // namespace kvgate::engine
