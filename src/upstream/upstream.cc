#include "upstream/upstream.h"

#include <httplib.h>

#include <fmt/format.h>

#include "http/client.h"
#include "http/sse.h"

namespace kvgate::gateway {

using http::SseParser;

namespace {

using Clock = std::chrono::steady_clock;

std::chrono::milliseconds since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t);
}

thread_local const ConversationTag* current_tag = nullptr;

std::unique_ptr<httplib::Client> make_client(const EngineEndpoint& ep, std::chrono::milliseconds read_timeout) {
  auto c = http::make_client(ep.host, ep.port, {.read_timeout = read_timeout, .bearer_token = ep.api_key});
  const std::string* conversation = ConversationTag::current();
  if (!ep.conversation_header.empty() && conversation != nullptr) {
    c->set_default_headers({{ep.conversation_header, *conversation}});
  }
  return c;
}

// `silent_for`: how long the connection had been silent when the read failed; `timeout`: the
// read time-out in force. httplib reports a closed connection and a time-out alike (Read),
// so a read that failed well before the time-out is a closed connection (an engine that
// died or broke its answer), not a slow one.
UpstreamError failure(httplib::Error err, const EngineEndpoint& ep, const CancelScope* cancel,
                      std::chrono::milliseconds silent_for, std::chrono::milliseconds timeout) {
  if (cancel != nullptr && cancel->cancelled()) return {UpstreamFailure::kCancelled, "the request was cancelled", 0};
  switch (err) {
    case httplib::Error::Connection:
      return {UpstreamFailure::kConnect,
              fmt::format("cannot connect to the engine at {}:{} (is it running?)", ep.host, ep.port), 2};
    case httplib::Error::Read:
      if (silent_for + std::chrono::milliseconds(500) < timeout) {
        return {UpstreamFailure::kBroken, "the engine closed the connection before its answer was complete", 0};
      }
      return {UpstreamFailure::kTimeout,
              fmt::format("the engine sent nothing for {} s", std::chrono::duration_cast<std::chrono::seconds>(timeout).count()),
              0};
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

ConversationTag::ConversationTag(std::string id) : id_(std::move(id)), outer_(current_tag) {
  current_tag = this;
}
ConversationTag::~ConversationTag() { current_tag = outer_; }
const std::string* ConversationTag::current() { return current_tag != nullptr ? &current_tag->id_ : nullptr; }

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

UpstreamResult<UpstreamResponse> HttpUpstream::call(const std::string& method, const std::string& path,
                                                    const std::string& body, std::chrono::milliseconds timeout,
                                                    CancelScope* cancel) {
  const EngineEndpoint ep = provider_();
  if (!ep.available) return unavailable(ep);
  auto client = make_client(ep, timeout);
  if (cancel != nullptr) cancel->attach(client.get());
  const auto t0 = Clock::now();
  httplib::Result res = method == "GET" ? client->Get(path.c_str()) : client->Post(path.c_str(), body, "application/json");
  if (cancel != nullptr) cancel->detach();
  if (!res) return failure(res.error(), ep, cancel, since(t0), timeout);
  return UpstreamResponse{res->status, std::move(res->body), res->get_header_value("Content-Type")};
}

UpstreamResult<int> HttpUpstream::stream(const std::string& path, const std::string& body,
                                         const StreamHandlers& handlers, std::chrono::milliseconds idle_timeout,
                                         CancelScope* cancel) {
  const EngineEndpoint ep = provider_();
  if (!ep.available) return unavailable(ep);
  auto client = make_client(ep, idle_timeout);
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.headers.emplace("Accept", "text/event-stream");
  req.body = body;
  req.set_header("Content-Type", "application/json");
  int status = 0;
  bool stopped_by_us = false;
  auto last_activity = Clock::now();
  req.response_handler = [&](const httplib::Response& r) {
    last_activity = Clock::now();
    status = r.status;
    if (handlers.on_start && !handlers.on_start(r.status, r.get_header_value("Content-Type"))) {
      stopped_by_us = true;
      return false;
    }
    return true;
  };
  req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
    last_activity = Clock::now();
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
    return failure(res.error(), ep, cancel, since(last_activity), idle_timeout);
  }
  return res->status;
}

EventStreamEnd stream_events(Upstream& upstream, const std::string& path, const std::string& body,
                             const std::function<void(const std::string& data)>& on_event,
                             std::chrono::milliseconds idle_timeout, CancelScope* cancel) {
  EventStreamEnd end;
  SseParser parser;
  auto res = upstream.stream(path, body,
                             {.on_start = [&](int st, const std::string&) {
                                end.status = st;
                                return true;
                              },
                              .on_data = [&](std::string_view data) {
                                if (end.status != 200) {
                                  end.error_body.append(data);
                                  return end.error_body.size() < 65536;
                                }
                                for (const auto& ev : parser.feed(data)) {
                                  if (!ev.comment_only) on_event(ev.data);
                                }
                                return true;
                              }},
                             idle_timeout, cancel);
  if (!res.ok()) end.failure = res.error();
  return end;
}

}  // namespace kvgate::gateway
