// UpstreamDouble: the base of kvgate's gateway::Upstream test doubles (ScriptedUpstream, the
// RecordingUpstream of gateway_e2e.h, the small engines of unit tests). It keeps every request
// it is asked, in order (method, path, the body parsed: null when not JSON, and its text), then hands
// the request to the double's answer() or answer_stream(). A double that is never asked to
// stream leaves answer_stream(), which fails as a broken connection would.
//
// Thread-safety: the record is guarded by one mutex; answer() and answer_stream() may run on
// several threads at once (a double guards its own state).
#pragma once

#include <chrono>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "upstream/upstream.h"

namespace kvgate::testing {

class UpstreamDouble : public gateway::Upstream {
 public:
  struct Call {
    std::string method;
    std::string path;
    nlohmann::json body;  // null when the body is not JSON
    std::string text;     // the body as sent (its key order, which `body` sorts)
  };
  // The requests to `path` so far, oldest first (every request when `path` is empty).
  std::vector<Call> calls(std::string_view path = {}) const;
  // The bodies of calls(path).
  std::vector<nlohmann::json> bodies(std::string_view path) const;

  gateway::UpstreamResult<gateway::UpstreamResponse> call(const std::string& method, const std::string& path,
                                                          const std::string& body,
                                                          std::chrono::milliseconds timeout,
                                                          gateway::CancelScope* cancel) final;
  gateway::UpstreamResult<int> stream(const std::string& path, const std::string& body,
                                      const gateway::StreamHandlers& handlers,
                                      std::chrono::milliseconds idle_timeout,
                                      gateway::CancelScope* cancel) final;

 protected:
  // One request as the gateway made it (a stream is a POST; `timeout` is then its idle timeout).
  struct Request {
    const std::string& method;
    const std::string& path;
    const std::string& body;
    const nlohmann::json& json;  // `body` parsed, null when not JSON
    std::chrono::milliseconds timeout;
    gateway::CancelScope* cancel;
  };
  virtual gateway::UpstreamResult<gateway::UpstreamResponse> answer(const Request& request) = 0;
  virtual gateway::UpstreamResult<int> answer_stream(const Request& request,
                                                     const gateway::StreamHandlers& handlers);

 private:
  // Parses `body`, keeps the call and returns the parsed body.
  nlohmann::json record(const std::string& method, const std::string& path, const std::string& body);

  mutable std::mutex mu_;
  std::vector<Call> calls_;  // guarded by mu_
};

}  // namespace kvgate::testing
