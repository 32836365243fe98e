#include "testing/upstream_double.h"

namespace kvgate::testing {

using gateway::UpstreamResponse;
using gateway::UpstreamResult;

std::vector<UpstreamDouble::Call> UpstreamDouble::calls(std::string_view path) const {
  std::lock_guard lock(mu_);
  std::vector<Call> out;
  for (const auto& c : calls_) {
    if (path.empty() || c.path == path) out.push_back(c);
  }
  return out;
}

std::vector<nlohmann::json> UpstreamDouble::bodies(std::string_view path) const {
  std::vector<nlohmann::json> out;
  for (auto& c : calls(path)) out.push_back(std::move(c.body));
  return out;
}

nlohmann::json UpstreamDouble::record(const std::string& method, const std::string& path,
                                      const std::string& body) {
  nlohmann::json parsed = nlohmann::json::parse(body, nullptr, false);
  if (parsed.is_discarded()) parsed = nullptr;
  std::lock_guard lock(mu_);
  calls_.push_back({method, path, parsed, body});
  return parsed;
}

UpstreamResult<UpstreamResponse> UpstreamDouble::call(const std::string& method, const std::string& path,
                                                      const std::string& body,
                                                      std::chrono::milliseconds timeout,
                                                      gateway::CancelScope* cancel) {
  const nlohmann::json parsed = record(method, path, body);
  return answer({method, path, body, parsed, timeout, cancel});
}

UpstreamResult<int> UpstreamDouble::stream(const std::string& path, const std::string& body,
                                           const gateway::StreamHandlers& handlers,
                                           std::chrono::milliseconds idle_timeout,
                                           gateway::CancelScope* cancel) {
  static const std::string kPost = "POST";
  const nlohmann::json parsed = record(kPost, path, body);
  return answer_stream({kPost, path, body, parsed, idle_timeout, cancel}, handlers);
}

UpstreamResult<int> UpstreamDouble::answer_stream(const Request& request, const gateway::StreamHandlers&) {
  return gateway::UpstreamError{.kind = gateway::UpstreamFailure::kBroken,
                                .message = "this test engine does not stream (" + request.path + ")"};
}

}  // namespace kvgate::testing
