// TimingUpstream: a gateway::Upstream that forwards everything to another upstream and
// notes when each SSE event of a streamed answer arrived from the engine — before the
// gateway sees it. With the client's arrival time of the same event (the gateway relays
// events byte for byte) this gives the gateway's relay delay per event.
//
// Thread-safety: calls may run concurrently; the record is locked.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "upstream/upstream.h"

namespace kvgate::bench {

class TimingUpstream : public gateway::Upstream {
 public:
  using Clock = std::chrono::steady_clock;
  explicit TimingUpstream(std::shared_ptr<gateway::Upstream> inner) : inner_(std::move(inner)) {}

  gateway::UpstreamResult<gateway::UpstreamResponse> call(const std::string& method, const std::string& path,
                                                          const std::string& body, std::chrono::milliseconds timeout,
                                                          gateway::CancelScope* cancel) override;
  gateway::UpstreamResult<int> stream(const std::string& path, const std::string& body,
                                      const gateway::StreamHandlers& handlers, std::chrono::milliseconds idle_timeout,
                                      gateway::CancelScope* cancel) override;
  gateway::EngineEndpoint endpoint() override { return inner_->endpoint(); }

  // The raw text of every data event of streamed answers since the last take(), with the
  // time its last byte arrived from the engine.
  std::vector<std::pair<std::string, Clock::time_point>> take();

 private:
  std::shared_ptr<gateway::Upstream> inner_;
  std::mutex mu_;
  std::vector<std::pair<std::string, Clock::time_point>> events_;  // guarded by mu_
};

}  // namespace kvgate::bench
