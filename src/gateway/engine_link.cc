// EngineLink (engine_link.h): waiting for the engine, its failures and error answers as the
// client's errors, how long its silence is waited through, what a new engine means; and
// EngineResend, the one resend of a request the engine lost before answering.
#include "gateway/engine_link.h"

#include <algorithm>
#include <thread>

#include <fmt/format.h>

#include "gateway/engine_api_error.h"
#include "upstream/engine_errors.h"
#include "util/log.h"

namespace kvgate::gateway {

EngineLink::EngineLink(EngineLinkOptions options, Upstream& upstream, Metrics& metrics)
    : options_(std::move(options)),
      upstream_(upstream),
      metrics_(metrics),
      prefill_ms_per_token_(options_.initial_prefill_ms_per_token) {}

std::chrono::milliseconds EngineLink::engine_wait(const EngineEndpoint& ep) const {
  return ep.coming_back ? std::max(options_.wait_for_engine, options_.wait_for_restart)
                        : options_.wait_for_engine;
}

ApiStatus EngineLink::wait_for_engine(const ClientGone& client_gone) {
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    EngineEndpoint ep = upstream_.endpoint();
    if (ep.available) return {};
    if (std::chrono::steady_clock::now() - start >= engine_wait(ep) || client_gone()) {
      return unavailable(fmt::format("the engine is not available ({}); retry shortly", ep.state),
                         ep.retry_after_s);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
}

bool EngineLink::wait_for_engine_again(const EngineEndpoint& before, const ClientGone& client_gone) {
  const auto start = std::chrono::steady_clock::now();
  bool was_down = false;
  for (;;) {
    if (client_gone()) return false;
    const EngineEndpoint ep = upstream_.endpoint();
    const auto waited = std::chrono::steady_clock::now() - start;
    if (!ep.available) {
      was_down = true;
    } else if (was_down || ep.port != before.port) {
      return true;  // a new engine
    } else if (waited > std::chrono::milliseconds(1500)) {
      return true;  // the same engine, still up: the failure was transient
    }
    if (waited >= engine_wait(ep)) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

ApiError EngineLink::from_upstream_error(const UpstreamError& e) const {
  if (options_.on_engine_failure &&
      (e.kind == UpstreamFailure::kConnect || e.kind == UpstreamFailure::kTimeout ||
       e.kind == UpstreamFailure::kBroken)) {
    options_.on_engine_failure(e.message);
  }
  switch (e.kind) {
    case UpstreamFailure::kUnavailable:
    case UpstreamFailure::kConnect:
      return unavailable(e.message, e.retry_after_s > 0 ? e.retry_after_s : 2);
    case UpstreamFailure::kTimeout:
      return gateway_timeout(e.message);
    case UpstreamFailure::kCancelled:
      return client_closed(e.message);
    case UpstreamFailure::kBroken:
      break;
  }
  return bad_gateway(e.message);
}

ApiError EngineLink::from_engine_answer(int status, const std::string& body) const {
  // A 5xx that is not about this request's content (overflow, template, output parsing)
  // may be a wedged engine: let the supervisor look.
  const bool unexplained =
      status >= 500 && classify_engine_error(status, body).kind == EngineErrorKind::kOther;
  if (unexplained) {
    const int in_row = ++errors_in_row_;
    if (options_.on_engine_failure) options_.on_engine_failure(fmt::format("the engine answered {}", status));
    if (in_row >= 2 && options_.on_requests_failing) {
      options_.on_requests_failing(
          fmt::format("the engine answered {} to {} requests in a row", status, in_row));
    }
  } else {
    errors_in_row_ = 0;
  }
  return engine_api_error(status, body);
}

std::chrono::milliseconds EngineLink::upstream_timeout(uint64_t prompt_tokens, bool whole_answer) const {
  // Expected prefill with a 3x margin (never below the configured minimum), plus room for
  // generation when waiting for the whole answer.
  const double prefill_ms = static_cast<double>(prompt_tokens) * prefill_ms_per_token_.load() * 3.0;
  const auto floor = std::chrono::duration_cast<std::chrono::milliseconds>(options_.min_upstream_timeout);
  const auto wait = std::max(floor, std::chrono::milliseconds(static_cast<int64_t>(prefill_ms)));
  return whole_answer
             ? wait + std::chrono::duration_cast<std::chrono::milliseconds>(options_.generation_timeout)
             : wait;
}

void EngineLink::learn_prefill_speed(double ms_per_token, uint64_t tokens) {
  if (ms_per_token <= 0 || tokens < 64) return;
  const double old = prefill_ms_per_token_.load();
  prefill_ms_per_token_.store(old * 0.7 + ms_per_token * 0.3);
}

void EngineLink::on_restart(bool hung) {
  ++generation_;
  if (const size_t fatal = fatal_.engine_lost(hung); fatal > 0) {
    metrics_.add("fatal_requests_total", static_cast<double>(fatal));
    util::log_event(
        util::LogLevel::kWarn, "fatal_request",
        {{"requests", fatal},
         {"detail", "the engine was lost while working on it; it is not sent to the engine again"}});
  }
}

EngineResend::Verdict EngineResend::again(UpstreamFailure failure, const CancelScope& cancel,
                                          const ClientGone& client_gone) {
  if (!lost_before_answering(failure) || cancel.cancelled()) return Verdict::kNo;
  FatalRequests& fatal = engine_.fatal();
  if (resends_ >= 1) return fatal.fatal(digest_) ? Verdict::kTookEngineDown : Verdict::kNo;
  ++resends_;
  if (!engine_.wait_for_engine_again(before_, client_gone)) return Verdict::kNo;
  // A request that was alone with the engine when it was lost is what took it down: it is
  // not sent again (fatal_requests.h).
  if (fatal.fatal(digest_)) return Verdict::kTookEngineDown;
  engine_.metrics().add("engine_retries_total");
  return Verdict::kAgain;
}

}  // namespace kvgate::gateway
