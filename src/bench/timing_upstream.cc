#include "bench/timing_upstream.h"

#include "http/sse.h"

namespace kvgate::bench {

gateway::UpstreamResult<gateway::UpstreamResponse> TimingUpstream::call(const std::string& method,
                                                                        const std::string& path,
                                                                        const std::string& body,
                                                                        std::chrono::milliseconds timeout,
                                                                        gateway::CancelScope* cancel) {
  return inner_->call(method, path, body, timeout, cancel);
}

gateway::UpstreamResult<int> TimingUpstream::stream(const std::string& path, const std::string& body,
                                                    const gateway::StreamHandlers& handlers,
                                                    std::chrono::milliseconds idle_timeout,
                                                    gateway::CancelScope* cancel) {
  http::SseParser parser;
  gateway::StreamHandlers wrapped;
  wrapped.on_start = handlers.on_start;
  wrapped.on_data = [&](std::string_view data) {
    const auto arrived = Clock::now();
    const bool go_on = handlers.on_data ? handlers.on_data(data) : true;
    // Parsed after the gateway has handled (and relayed) the piece, so this does not delay it.
    auto events = parser.feed(data);
    std::lock_guard lock(mu_);
    for (auto& ev : events) {
      if (ev.has_data) events_.emplace_back(std::move(ev.raw), arrived);
    }
    return go_on;
  };
  return inner_->stream(path, body, wrapped, idle_timeout, cancel);
}

std::vector<std::pair<std::string, TimingUpstream::Clock::time_point>> TimingUpstream::take() {
  std::lock_guard lock(mu_);
  return std::exchange(events_, {});
}

}  // namespace kvgate::bench
