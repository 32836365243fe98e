// Gateway: kvgate's OpenAI-compatible front. One instance serves every route; the HTTP
// edge (HttpServer) calls handle() for each request.
//
// Routes (one table in gateway.cc):
//   POST /v1/chat/completions   sessions, thinking policy, slots, token accounting, relay
//   POST /v1/completions        relayed (stream or not) with metrics
//   GET  /v1/models             relayed
//   GET  /health                gateway + engine state (public: no key needed)
//   GET  /metrics               Prometheus text
//   GET  /kvgate/v1/status      JSON: engine, sessions, slots, token accounting, counters
//   GET  /kvgate/v1/sessions[/ID]
//   /tokenize /detokenize /apply-template /props /slots   passed through
// Everything but /health needs the API key when one is configured (Authorization: Bearer
// or x-api-key; compared in constant time). Errors are OpenAI-format JSON with proper
// statuses; nothing a client sends reaches an exception outside handle()'s own catch.
//
// Thread-safety: handle() is called concurrently from connection threads; all shared state
// lives in thread-safe components (SessionTable, SlotPool, TokenCounter, Metrics).
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "gateway/api_error.h"
#include "gateway/http_server.h"
#include "gateway/metrics.h"
#include "gateway/session.h"
#include "gateway/thinking.h"
#include "gateway/tokens.h"
#include "gateway/upstream.h"

namespace kvgate::gateway {

struct GatewayOptions {
  std::string api_key;                 // empty: no authentication
  int slots = 1;                       // engine slots (-np); sessions are pinned to them
  size_t max_sessions = 1024;
  ThinkingOptions thinking;
  bool count_tokens = true;            // exact prompt accounting on every chat request
  std::chrono::milliseconds stream_head_grace{1500};
  std::chrono::milliseconds keepalive{10000};
  std::chrono::milliseconds wait_for_engine{30000};  // engine restarting: wait this long, then 503
  double initial_prefill_ms_per_token = 20.0;        // until measured
  std::chrono::seconds min_upstream_timeout{300};
  std::string model_name = "kvgate";
};

class Gateway {
 public:
  Gateway(GatewayOptions options, std::shared_ptr<Upstream> upstream);
  ~Gateway();

  void handle(const HttpRequest& request, ResponseWriter& writer);

  SessionTable& sessions() { return sessions_; }
  Metrics& metrics() { return metrics_; }
  TokenCounter& tokens() { return tokens_; }
  const GatewayOptions& options() const { return options_; }
  // Called by the supervisor when the engine restarted (its cache is empty again).
  void on_engine_restart();

 private:
  using Route = void (Gateway::*)(const HttpRequest&, ResponseWriter&);
  void chat(const HttpRequest& request, ResponseWriter& writer);
  void completions(const HttpRequest& request, ResponseWriter& writer);
  void passthrough(const HttpRequest& request, ResponseWriter& writer);
  void health(const HttpRequest& request, ResponseWriter& writer);
  void prometheus(const HttpRequest& request, ResponseWriter& writer);
  void status(const HttpRequest& request, ResponseWriter& writer);
  void list_sessions(const HttpRequest& request, ResponseWriter& writer);

  bool authorised(const HttpRequest& request) const;
  void send_error(ResponseWriter& writer, const ApiError& error);
  void send_json(ResponseWriter& writer, int status, const nlohmann::json& body);
  // Waits (up to options_.wait_for_engine) for the engine; nullopt when available.
  std::optional<ApiError> wait_for_engine(ResponseWriter& writer);
  ApiError from_upstream_error(const UpstreamError& e) const;
  // Relays an engine error answer (status + body) as an OpenAI-format error.
  ApiError from_engine_answer(int status, const std::string& body) const;
  std::chrono::milliseconds upstream_timeout(uint64_t prompt_tokens, bool whole_answer) const;
  void learn_prefill_speed(double ms_per_token, uint64_t tokens);

  GatewayOptions options_;
  std::shared_ptr<Upstream> upstream_;
  SessionTable sessions_;
  SlotPool slots_;
  TokenCounter tokens_;
  Metrics metrics_;
  std::atomic<double> prefill_ms_per_token_;
  std::atomic<uint64_t> engine_generation_{0};
};

}  // namespace kvgate::gateway
