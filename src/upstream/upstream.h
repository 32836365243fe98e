// Upstream: the gateway's only way to talk to the engine.
//
// The engine's address and key can change (a restart picks a new port and key), so every
// request asks an EndpointProvider where the engine is right now, and whether it is
// available at all (while the supervisor restarts it, requests fail fast with the state
// and a retry hint instead of hanging).
//
// Requests are cancellable from another thread: a CancelScope passed to a call can be
// cancelled (e.g. because the client disconnected), which closes the upstream connection;
// the engine notices the closed socket and stops working on the request.
//
// Thread-safety: HttpUpstream is stateless apart from the provider and may be used from any
// number of threads; a CancelScope is for one call at a time.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "util/result.h"

namespace httplib {
class Client;
}

namespace kvgate::gateway {

struct EngineEndpoint {
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  std::string api_key;
  bool available = true;
  // Not available, and a new engine is on its way (the supervisor is starting, verifying or
  // restarting one): a request may wait as long as such a start may take.
  bool coming_back = false;
  std::string state = "ready";  // supervisor state, for messages
  int retry_after_s = 5;
  // When set, requests made for a conversation (ConversationTag) carry its id in this header,
  // for a router in front of several engines that keeps a session on one (docs/SCALING.md).
  std::string conversation_header;
};

// The conversation the calling thread works for (kvgate's session id), while the tag lives.
// Tags nest: the innermost is current.
class ConversationTag {
 public:
  explicit ConversationTag(std::string id);
  ~ConversationTag();
  ConversationTag(const ConversationTag&) = delete;
  ConversationTag& operator=(const ConversationTag&) = delete;
  static const std::string* current();  // nullptr when no tag lives on this thread

 private:
  std::string id_;
  const ConversationTag* outer_;
};

using EndpointProvider = std::function<EngineEndpoint()>;

struct UpstreamResponse {
  int status = 0;
  std::string body;
  std::string content_type;
};

// Why an upstream call failed before an HTTP answer arrived.
enum class UpstreamFailure { kUnavailable, kConnect, kTimeout, kCancelled, kBroken };

struct UpstreamError {
  UpstreamFailure kind = UpstreamFailure::kBroken;
  std::string message;
  int retry_after_s = 0;
};

// The engine could not be reached or went away before it answered: what a restarted engine
// may answer (chat turns and raw completions send such a request once more).
inline bool lost_before_answering(UpstreamFailure kind) {
  return kind == UpstreamFailure::kConnect || kind == UpstreamFailure::kBroken ||
         kind == UpstreamFailure::kUnavailable;
}

class CancelScope {
 public:
  void cancel();
  bool cancelled() const { return cancelled_.load(); }
  // Used by the upstream implementation while a call is in flight.
  void attach(httplib::Client* client);
  void detach();

 private:
  std::mutex mu_;
  httplib::Client* client_ = nullptr;  // guarded by mu_
  std::atomic<bool> cancelled_{false};
};

struct StreamHandlers {
  // Called once when the answer's head arrives; return false to stop.
  std::function<bool(int status, const std::string& content_type)> on_start;
  // Called for each piece of the body; return false to stop (cancels the request).
  std::function<bool(std::string_view data)> on_data;
};

template <typename T>
using UpstreamResult = Result<T, UpstreamError>;

class Upstream {
 public:
  virtual ~Upstream() = default;
  // A complete request/response (any HTTP status). `timeout` bounds the wait for the answer.
  virtual UpstreamResult<UpstreamResponse> call(const std::string& method, const std::string& path,
                                                const std::string& body, std::chrono::milliseconds timeout,
                                                CancelScope* cancel = nullptr) = 0;
  // A POST whose answer is consumed as it arrives. `idle_timeout` bounds the silence
  // between two pieces (and before the head). Returns the HTTP status on success.
  virtual UpstreamResult<int> stream(const std::string& path, const std::string& body,
                                     const StreamHandlers& handlers, std::chrono::milliseconds idle_timeout,
                                     CancelScope* cancel = nullptr) = 0;
  virtual EngineEndpoint endpoint() = 0;
};

class HttpUpstream : public Upstream {
 public:
  explicit HttpUpstream(EndpointProvider provider) : provider_(std::move(provider)) {}
  UpstreamResult<UpstreamResponse> call(const std::string& method, const std::string& path,
                                        const std::string& body, std::chrono::milliseconds timeout,
                                        CancelScope* cancel) override;
  UpstreamResult<int> stream(const std::string& path, const std::string& body, const StreamHandlers& handlers,
                             std::chrono::milliseconds idle_timeout, CancelScope* cancel) override;
  EngineEndpoint endpoint() override { return provider_(); }

 private:
  EndpointProvider provider_;
};

// An engine answer streamed as server-sent events (llama-server's /completion with
// "stream": true), consumed event by event.
struct EventStreamEnd {
  std::optional<UpstreamError> failure;  // the engine could not be reached or broke off
  int status = 0;                        // the answer's HTTP status
  std::string error_body;                // the first 64 KiB of a non-200 answer
};
// POSTs `body` to `path` and hands the data of each event (comment-only events skipped) to
// `on_event` while the status is 200; bounds as Upstream::stream.
EventStreamEnd stream_events(Upstream& upstream, const std::string& path, const std::string& body,
                             const std::function<void(const std::string& data)>& on_event,
                             std::chrono::milliseconds idle_timeout, CancelScope* cancel = nullptr);

}  // namespace kvgate::gateway
