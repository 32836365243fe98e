// Metrics: what every request cost and where its tokens came from, for /metrics
// (Prometheus text format 0.0.4) and the kvgate JSON endpoints.
//
// One RequestRecord per finished request feeds counters (by route and outcome), token
// totals (prompt, served from the engine's cache, prefilled, completion) and latency
// histograms (time to first token, total). Other components add named counters (e.g.
// "compactions_total{level=\"L2\"}") with add(). Thread-safe (one internal mutex).
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace kvgate::gateway {

struct RequestRecord {
  std::string route;       // "chat", "completions", "passthrough", ...
  int status = 200;
  bool stream = false;
  std::string error_kind;  // "" on success; e.g. "client_disconnect", "upstream_timeout"
  uint64_t prompt_tokens = 0;
  uint64_t cached_tokens = 0;
  uint64_t prefilled_tokens = 0;
  uint64_t completion_tokens = 0;
  double ttft_ms = -1;     // -1: unknown
  double total_ms = 0;
  double decode_tokens_per_s = 0;
  double accounting_ms = 0;  // token accounting cost
  double prefill_tokens_per_s = 0;  // the engine's prompt speed for this request (0: unknown)
  std::string session;              // chat turns: the conversation, and its key's scope
  std::string scope;
};

class Histogram {
 public:
  static constexpr std::array<double, 14> kBoundsMs = {5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 300000};
  void observe(double v);
  void render(std::string& out, const std::string& name, const std::string& labels) const;
  uint64_t count() const { return count_; }
  double sum() const { return sum_; }

 private:
  std::array<uint64_t, kBoundsMs.size()> buckets_{};
  uint64_t count_ = 0;
  double sum_ = 0;
};

class Metrics {
 public:
  void record(const RequestRecord& r);
  // Adds to a free-form counter; `name` may carry labels: compactions_total{level="L1"}.
  void add(const std::string& name, double value = 1);
  void set_gauge(const std::string& name, double value);

  // Prometheus text; `extra` lets the caller append live gauges (sessions, slots, engine).
  std::string prometheus(const std::function<void(std::string&)>& extra = nullptr) const;
  nlohmann::json to_json() const;
  // Of the last kRecent chat turns, oldest first, those of `scope` (every one when nullopt: a
  // gateway without keys): {ts, session, status, prompt/cached/prefilled/completion tokens,
  // ttft_ms, prefill_tokens_per_s, decode_tokens_per_s} (unknown figures null). Another key's
  // turns are left out whole: even their figures tell what it sends and when.
  static constexpr size_t kRecent = 120;
  nlohmann::json recent(const std::optional<std::string>& scope) const;

 private:
  struct Recent {
    int64_t ts_ms;
    RequestRecord record;
  };
  std::deque<Recent> recent_;
  mutable std::mutex mu_;
  std::map<std::string, uint64_t> requests_;  // key: route|status|stream
  uint64_t prompt_tokens_ = 0, cached_tokens_ = 0, prefilled_tokens_ = 0, completion_tokens_ = 0;
  double accounting_ms_ = 0;
  uint64_t accounted_requests_ = 0;
  std::map<std::string, uint64_t> errors_;
  Histogram ttft_, total_;
  std::map<std::string, double> counters_;
  std::map<std::string, double> gauges_;
};

}  // namespace kvgate::gateway
