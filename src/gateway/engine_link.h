// EngineLink: the gateway's dealings with its one engine around a request, shared by every
// route that sends work to it (chat turns, raw completions, passthrough, compaction):
// waiting for the engine to be there, or back after a restart; how long its silence is
// waited through (the prefill speed it learns); its failures and error answers in the
// client's terms, with the supervisor told of a failing engine; the requests that were with
// it when it was lost (fatal_requests.h); and the one resend of a request the engine lost
// before answering (EngineResend).
//
// Thread-safety: all methods may be called concurrently; state is atomic or in
// FatalRequests, which locks.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "gateway/api_error.h"
#include "gateway/fatal_requests.h"
#include "metrics/metrics.h"
#include "upstream/upstream.h"

namespace kvgate::gateway {

// Whether a request's client has gone (polled while it waits).
using ClientGone = std::function<bool()>;

// The parts of GatewayOptions (gateway.h) that EngineLink reads; the meanings are there.
struct EngineLinkOptions {
  std::chrono::milliseconds wait_for_engine{30000};
  std::chrono::milliseconds wait_for_restart{0};
  double initial_prefill_ms_per_token = 20.0;
  std::chrono::seconds min_upstream_timeout{300};
  std::chrono::seconds generation_timeout{600};
  std::function<void(const std::string& what)> on_engine_failure;
  std::function<void(const std::string& what)> on_requests_failing;
};

class EngineLink {
 public:
  // `upstream` and `metrics` outlive the link.
  EngineLink(EngineLinkOptions options, Upstream& upstream, Metrics& metrics);

  Upstream& upstream() { return upstream_; }
  Metrics& metrics() { return metrics_; }
  FatalRequests& fatal() { return fatal_; }
  // Counts the engines started (on_restart); state tied to one engine is kept per generation.
  uint64_t generation() const { return generation_.load(); }
  double prefill_ms_per_token() const { return prefill_ms_per_token_.load(); }

  // Waits (up to wait_for_engine, or wait_for_restart while one is coming back) for the
  // engine to be available; 503 when it is not.
  ApiStatus wait_for_engine(const ClientGone& client_gone);
  // After the engine failed a request before answering it: waits until the engine was seen
  // to restart (or stays the same engine for a moment: a transient failure). True when a
  // retry may go ahead.
  bool wait_for_engine_again(const EngineEndpoint& before, const ClientGone& client_gone);
  // The engine answered (successfully or with an explained error): not failing.
  void answered() { errors_in_row_ = 0; }
  ApiError from_upstream_error(const UpstreamError& e) const;
  // Relays an engine error answer (status + body) as an OpenAI-format error.
  ApiError from_engine_answer(int status, const std::string& body) const;
  std::chrono::milliseconds upstream_timeout(uint64_t prompt_tokens, bool whole_answer) const;
  void learn_prefill_speed(double ms_per_token, uint64_t tokens);
  // A new engine (the supervisor restarted it; `hung`: the old one was killed for not
  // answering): the next generation, and strikes for the requests that were with the old one.
  void on_restart(bool hung);

 private:
  const EngineLinkOptions options_;
  Upstream& upstream_;
  Metrics& metrics_;
  FatalRequests fatal_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<double> prefill_ms_per_token_;
  mutable std::atomic<int> errors_in_row_{0};  // unexplained engine 5xx since the last good answer

  std::chrono::milliseconds engine_wait(const EngineEndpoint& ep) const;
};

// The one resend a request gets when the engine was lost before any of its answer reached
// the client (it could not be reached, or died during the prefill): the request is sent
// once more, to the restarted engine, unless it is what took the engine down. Chat turns
// (turn_send.cc) and raw completions (completions_route.cc) both send through one.
//
// Use: before() ahead of each attempt, then, for an attempt that failed before answering,
// again() says whether to send it once more.
//
// Thread-safety: one per request, on its thread.
class EngineResend {
 public:
  // `digest`: the request's FatalRequests::digest.
  EngineResend(EngineLink& engine, uint64_t digest) : engine_(engine), digest_(digest) {}

  // Notes the engine the next attempt goes to.
  void before() { before_ = engine_.upstream().endpoint(); }

  enum class Verdict {
    kAgain,           // the engine is back: send it once more
    kNo,              // answer the attempt's failure
    kTookEngineDown,  // it was alone with the engine it lost: answer fatal_request_error(false)
  };
  // After an attempt that failed with `failure`, nothing of its answer relayed. Waits for the
  // engine to come back when a resend is worth it.
  Verdict again(UpstreamFailure failure, const CancelScope& cancel, const ClientGone& client_gone);
  int resends() const { return resends_; }

 private:
  EngineLink& engine_;
  const uint64_t digest_;
  EngineEndpoint before_;
  int resends_ = 0;
};

}  // namespace kvgate::gateway
