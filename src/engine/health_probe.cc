#include "engine/health_probe.h"

#include <algorithm>

#include <fmt/format.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "http/client.h"
#include "util/json.h"

namespace kvgate::engine {
namespace {

// Every probe carries the engine's key (/health needs none, and ignores it).
std::unique_ptr<httplib::Client> client_for(const EngineEndpoint& ep, Millis timeout) {
  return http::make_client(ep.host, ep.port,
                           {.connect_timeout = std::min<Millis>(timeout, Millis(2000)),
                            .read_timeout = timeout,
                            .write_timeout = timeout,
                            .bearer_token = ep.api_key});
}

std::string snippet(const std::string& body) {
  std::string s = body.substr(0, 200);
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

CheckResult from(const httplib::Result& res, std::string_view what, Millis timeout) {
  if (!res) {
    return {false, 0,
            fmt::format("{}: no answer within {} ms ({})", what, timeout.count(),
                        httplib::to_string(res.error()))};
  }
  if (res->status == 200) return {true, 200, ""};
  return {false, res->status, fmt::format("{}: HTTP {} {}", what, res->status, snippet(res->body))};
}

}  // namespace

CheckResult HttpEngineProber::health(const EngineEndpoint& ep, Millis timeout) {
  return from(client_for(ep, timeout)->Get("/health"), "GET /health", timeout);
}

CheckResult HttpEngineProber::deep(const EngineEndpoint& ep, Millis timeout) {
  auto res = client_for(ep, timeout)->Get("/slots");
  if (res && (res->status == 404 || res->status == 501)) return completion(ep, timeout);
  return from(res, "GET /slots", timeout);
}

CheckResult HttpEngineProber::completion(const EngineEndpoint& ep, Millis timeout) {
  const nlohmann::json body = {{"prompt", "Hello"}, {"max_tokens", 1}, {"temperature", 0}, {"stream", false}};
  auto res = client_for(ep, timeout)->Post("/v1/completions", util::json_text(body), "application/json");
  CheckResult r = from(res, "1-token completion", timeout);
  if (!r.ok) return r;
  const auto reply = nlohmann::json::parse(res->body, nullptr, false);
  if (reply.is_discarded() || !reply.is_object() || !reply.contains("choices") ||
      !reply["choices"].is_array() || reply["choices"].empty()) {
    return {false, res->status, "1-token completion: the answer has no choices: " + snippet(res->body)};
  }
  return r;
}

}  // namespace kvgate::engine
