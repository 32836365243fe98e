#include "metrics/metrics.h"

#include <chrono>

#include <fmt/format.h>

namespace kvgate::gateway {

void Histogram::observe(double v) {
  for (size_t i = 0; i < kBoundsMs.size(); ++i) {
    if (v <= kBoundsMs[i]) ++buckets_[i];
  }
  ++count_;
  sum_ += v;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& labels) const {
  const std::string sep = labels.empty() ? "" : ",";
  for (size_t i = 0; i < kBoundsMs.size(); ++i) {
    out += fmt::format("{}_bucket{{{}{}le=\"{}\"}} {}\n", name, labels, sep, kBoundsMs[i] / 1000.0, buckets_[i]);
  }
  out += fmt::format("{}_bucket{{{}{}le=\"+Inf\"}} {}\n", name, labels, sep, count_);
  out += fmt::format("{}_sum{{{}}} {}\n", name, labels, sum_ / 1000.0);
  out += fmt::format("{}_count{{{}}} {}\n", name, labels, count_);
}

void Metrics::record(const RequestRecord& r) {
  std::lock_guard lock(mu_);
  ++requests_[fmt::format("{}|{}|{}", r.route, r.status, r.stream ? "true" : "false")];
  prompt_tokens_ += r.prompt_tokens;
  cached_tokens_ += r.cached_tokens;
  prefilled_tokens_ += r.prefilled_tokens;
  completion_tokens_ += r.completion_tokens;
  if (r.accounting_ms > 0) {
    accounting_ms_ += r.accounting_ms;
    ++accounted_requests_;
  }
  if (!r.error_kind.empty()) ++errors_[r.error_kind];
  if (r.ttft_ms >= 0) ttft_.observe(r.ttft_ms);
  total_.observe(r.total_ms);
  if (r.route == "chat") {
    const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch()).count();
    recent_.push_back({now, r});
    while (recent_.size() > kRecent) recent_.pop_front();
  }
}

nlohmann::json Metrics::recent(const std::optional<std::string>& scope) const {
  std::lock_guard lock(mu_);
  auto known = [](double v) { return v > 0 ? nlohmann::json(v) : nlohmann::json(nullptr); };
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [ts, r] : recent_) {
    if (scope && r.scope != *scope) continue;
    out.push_back({{"ts", ts},
                   {"session", !r.session.empty() ? nlohmann::json(r.session) : nlohmann::json(nullptr)},
                   {"status", r.status},
                   {"prompt_tokens", r.prompt_tokens},
                   {"cached_tokens", r.cached_tokens},
                   {"prefilled_tokens", r.prefilled_tokens},
                   {"completion_tokens", r.completion_tokens},
                   {"ttft_ms", r.ttft_ms >= 0 ? nlohmann::json(r.ttft_ms) : nlohmann::json(nullptr)},
                   {"prefill_tokens_per_s", known(r.prefill_tokens_per_s)},
                   {"decode_tokens_per_s", known(r.decode_tokens_per_s)}});
  }
  return out;
}

void Metrics::add(const std::string& name, double value) {
  std::lock_guard lock(mu_);
  counters_[name] += value;
}

void Metrics::set_gauge(const std::string& name, double value) {
  std::lock_guard lock(mu_);
  gauges_[name] = value;
}

std::string Metrics::prometheus(const std::function<void(std::string&)>& extra) const {
  std::string out;
  std::lock_guard lock(mu_);
  out += "# HELP kvgate_requests_total Requests answered, by route, HTTP status and streaming.\n";
  out += "# TYPE kvgate_requests_total counter\n";
  for (const auto& [key, n] : requests_) {
    const size_t a = key.find('|');
    const size_t b = key.find('|', a + 1);
    out += fmt::format("kvgate_requests_total{{route=\"{}\",status=\"{}\",stream=\"{}\"}} {}\n", key.substr(0, a),
                       key.substr(a + 1, b - a - 1), key.substr(b + 1), n);
  }
  out += "# HELP kvgate_request_errors_total Failed requests by cause.\n# TYPE kvgate_request_errors_total counter\n";
  for (const auto& [kind, n] : errors_) out += fmt::format("kvgate_request_errors_total{{kind=\"{}\"}} {}\n", kind, n);
  auto counter = [&out](const char* name, const char* help, double v) {
    out += fmt::format("# HELP {} {}\n# TYPE {} counter\n{} {}\n", name, help, name, name, v);
  };
  counter("kvgate_prompt_tokens_total", "Prompt tokens sent to the engine.", static_cast<double>(prompt_tokens_));
  counter("kvgate_prompt_tokens_cached_total", "Prompt tokens the engine served from its KV cache.",
          static_cast<double>(cached_tokens_));
  counter("kvgate_prompt_tokens_prefilled_total", "Prompt tokens the engine had to compute.",
          static_cast<double>(prefilled_tokens_));
  counter("kvgate_completion_tokens_total", "Tokens generated.", static_cast<double>(completion_tokens_));
  counter("kvgate_token_accounting_seconds_total", "Time spent counting prompt tokens.", accounting_ms_ / 1000.0);
  out += "# HELP kvgate_cache_hit_ratio Share of prompt tokens served from the engine's cache.\n";
  out += "# TYPE kvgate_cache_hit_ratio gauge\n";
  out += fmt::format("kvgate_cache_hit_ratio {}\n",
                     prompt_tokens_ ? static_cast<double>(cached_tokens_) / static_cast<double>(prompt_tokens_) : 0.0);
  out += "# HELP kvgate_ttft_seconds Time to first token.\n# TYPE kvgate_ttft_seconds histogram\n";
  ttft_.render(out, "kvgate_ttft_seconds", "");
  out += "# HELP kvgate_request_seconds Request duration.\n# TYPE kvgate_request_seconds histogram\n";
  total_.render(out, "kvgate_request_seconds", "");
  std::string last_family;
  for (const auto& [name, v] : counters_) {
    const std::string family = "kvgate_" + name.substr(0, name.find('{'));
    if (family != last_family) out += fmt::format("# TYPE {} counter\n", family);
    last_family = family;
    out += fmt::format("kvgate_{} {}\n", name, v);
  }
  for (const auto& [name, v] : gauges_) {
    out += fmt::format("# TYPE kvgate_{} gauge\nkvgate_{} {}\n", name.substr(0, name.find('{')), name, v);
  }
  if (extra) extra(out);
  return out;
}

nlohmann::json Metrics::to_json() const {
  std::lock_guard lock(mu_);
  nlohmann::json req = nlohmann::json::object();
  for (const auto& [key, n] : requests_) req[key] = n;
  nlohmann::json counters = nlohmann::json::object();
  for (const auto& [k, v] : counters_) counters[k] = v;
  return {{"requests", req},
          {"errors", errors_},
          {"prompt_tokens", prompt_tokens_},
          {"cached_tokens", cached_tokens_},
          {"prefilled_tokens", prefilled_tokens_},
          {"completion_tokens", completion_tokens_},
          {"cache_hit_ratio",
           prompt_tokens_ ? static_cast<double>(cached_tokens_) / static_cast<double>(prompt_tokens_) : 0.0},
          {"token_accounting_ms_total", accounting_ms_},
          {"token_accounting_ms_mean", accounted_requests_ ? accounting_ms_ / static_cast<double>(accounted_requests_) : 0.0},
          {"ttft_ms_mean", ttft_.count() ? ttft_.sum() / static_cast<double>(ttft_.count()) : 0.0},
          {"counters", counters}};
}

}  // namespace kvgate::gateway
