#include "gateway/gateway.h"

#include <algorithm>
#include <thread>

#include <fmt/format.h>

#include "gateway/chat_completions.h"
#include "gateway/json_headers.h"
#include "gateway/messages_api.h"
#include "gateway/path_error.h"
#include "gateway/request_checks.h"
#include "upstream/engine_errors.h"
#include "upstream/reply.h"
#include "upstream/slot_listing.h"
#include "util/json.h"
#include "util/log.h"
#include "wire/anthropic_reply.h"

namespace kvgate::gateway {

using http::HeaderList;
using session::scope_of_key;

using nlohmann::json;

namespace {

bool constant_time_equal(std::string_view a, std::string_view b) {
  // Compare over the longer length so timing does not reveal the key's length either.
  const size_t n = std::max(a.size(), b.size());
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const auto x = static_cast<unsigned char>(i < a.size() ? a[i] : 0);
    const auto y = static_cast<unsigned char>(i < b.size() ? b[i] : 0);
    diff = static_cast<unsigned char>(diff | (x ^ y));
  }
  return diff == 0;
}

AdmissionOptions admission_options(const GatewayOptions& o) {
  AdmissionOptions a = o.admission;
  if (a.max_active == 0) a.max_active = static_cast<size_t>(std::max(1, o.slots));
  a.max_waiting_per_key = std::min(a.max_waiting_per_key, std::max<size_t>(a.max_waiting, 1));
  return a;
}

EngineLinkOptions engine_link_options(const GatewayOptions& o) {
  return {.wait_for_engine = o.wait_for_engine,
          .wait_for_restart = o.wait_for_restart,
          .initial_prefill_ms_per_token = o.initial_prefill_ms_per_token,
          .min_upstream_timeout = o.min_upstream_timeout,
          .generation_timeout = o.generation_timeout,
          .on_engine_failure = o.on_engine_failure,
          .on_requests_failing = o.on_requests_failing};
}

}  // namespace

Gateway::Gateway(GatewayOptions options, std::shared_ptr<Upstream> upstream)
    : options_(std::move(options)),
      upstream_(std::move(upstream)),
      sessions_(options_.max_sessions),
      slots_(options_.slots),
      tenants_(options_.slots, options_.api_keys.size() > 1),
      tokens_(*upstream_),
      engine_(engine_link_options(options_), *upstream_, metrics_),
      admission_(admission_options(options_)) {
  tokens_.set_time_limit(options_.count_time_limit);
  tokens_.set_counting(options_.counting, options_.counting_model);
  responses_ = options_.responses ? options_.responses : std::make_shared<ResponseStore>();
  // A model summary is a continuation of the view: one larger than the context cannot be sent.
  auto& co = options_.compaction_options;
  if (co.summary_prompt_limit == 0 && options_.context_tokens)
    co.summary_prompt_limit = *options_.context_tokens;
}

Gateway::~Gateway() = default;

Status Gateway::open_kv_states() {
  if (!plan::slot_states_reliable(options_.engine_fork)) {
    return Error("saved conversation states are off for this engine: its slot save/restore is unreliable");
  }
  auto kv = std::make_unique<KvKeeper>(options_.kv, *upstream_, metrics_, options_.slots);
  KV_TRY(kv->open());
  kv_ = std::move(kv);
  return util::ok_status();
}

void Gateway::save_kv_states() {
  if (kv_) kv_->save_all(engine_.generation());
}

RequestLimits Gateway::request_limits() {
  RequestLimits l{.max_messages = options_.max_messages, .max_token_bytes = options_.max_token_bytes};
  if (l.max_token_bytes > 0) l.context_tokens = context_tokens();
  return l;
}

// The route table: method, path (exact, or a prefix), whether the API key is needed.
struct Gateway::RouteTable {
  struct Entry {
    const char* method;
    const char* path;
    bool prefix;
    bool needs_key;
    Route route;
  };
  static constexpr Entry kRoutes[] = {
      {"POST", "/v1/chat/completions", false, true, &Gateway::chat},
      {"POST", "/chat/completions", false, true, &Gateway::chat},
      {"POST", "/v1/completions", false, true, &Gateway::completions},
      {"POST", "/v1/messages", false, true, &Gateway::messages},
      {"POST", "/v1/messages/count_tokens", false, true, &Gateway::count_message_tokens},
      {"POST", "/v1/responses", false, true, &Gateway::responses},
      {"POST", "/v1/responses/input_tokens", false, true, &Gateway::response_input_tokens},
      {"POST", "/v1/responses/compact", false, true, &Gateway::compact_responses},
      {"GET", "/v1/responses/", true, true, &Gateway::get_response},
      {"GET", "/v1/models", false, true, &Gateway::models},
      {"GET", "/v1/models/", true, true, &Gateway::models},
      {"GET", "/health", false, false, &Gateway::health},
      {"GET", "/v1/health", false, false, &Gateway::health},
      {"GET", "/metrics", false, true, &Gateway::prometheus},
      {"GET", "/kvgate/v1/status", false, true, &Gateway::status},
      {"GET", "/kvgate/v1/sessions", true, true, &Gateway::list_sessions},
      {"POST", "/kvgate/v1/sessions/", true, true, &Gateway::compact_session},
      {"POST", "/tokenize", false, true, &Gateway::passthrough},
      {"POST", "/detokenize", false, true, &Gateway::passthrough},
      {"POST", "/apply-template", false, true, &Gateway::passthrough},
      {"GET", "/props", false, true, &Gateway::passthrough},
      {"GET", "/slots", false, true, &Gateway::passthrough},
      // The status page and its assets hold no data (the page asks for it with the key).
      {"GET", "/", false, false, &Gateway::status_page},
      {"HEAD", "/", false, false, &Gateway::head_ok},
      {"GET", "/kvgate", false, false, &Gateway::status_page},
      {"GET", "/kvgate/", false, false, &Gateway::status_page},
      {"GET", "/kvgate/assets/", true, false, &Gateway::status_asset},
  };
};

namespace {

// A client-sent string quoted in an error message: at most `max` bytes, printable ASCII only.
std::string shown(std::string_view s, size_t max) {
  std::string out;
  for (char c : s.substr(0, max)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (s.size() > max) out += fmt::format("... ({} bytes)", s.size());
  return out;
}

}  // namespace

Result<Gateway::Routed, ApiError> Gateway::route_for(const HttpRequest& request) const {
  bool path_known = false;
  for (const auto& r : RouteTable::kRoutes) {
    const bool match = r.prefix ? request.path.rfind(r.path, 0) == 0 : request.path == r.path;
    if (!match) continue;
    path_known = true;
    if (request.method != r.method) continue;
    if (r.needs_key && !authorised(request)) break;
    // Every POST route reads a JSON body (request_checks.h).
    KV_TRY(check_request_head(request, request.method == "POST"));
    return Routed{r.route};
  }
  if (!authorised(request))
    return unauthorized("missing or wrong API key: send 'Authorization: Bearer <key>'");
  if (path_known) {
    return method_not_allowed(
        fmt::format("{} is not allowed on {}", shown(request.method, 32), shown(request.path, 256)));
  }
  return not_found(fmt::format("no route for {} {}", shown(request.method, 32), shown(request.path, 256)));
}

HeadVerdict Gateway::check_head(const HttpRequest& head) const {
  HeadVerdict v{.authenticated = authorised(head)};
  auto route = route_for(head);
  if (!route.ok()) {
    v.status = anthropic_path(head.path) ? anthropic_error_of(route.error()).status : route.error().status;
    v.headers = kJsonHeaders;
    v.body = error_body(head.path, route.error());
  }
  return v;
}

void Gateway::handle(const HttpRequest& request, ResponseWriter& writer) {
  try {
    auto route = route_for(request);
    if (!route.ok()) return send_error_for(request.path, writer, route.error());
    (this->*route->route)(request, writer);
  } catch (const std::exception& e) {
    util::log_event(util::LogLevel::kError, "internal_error",
                    {{"path", shown(request.path, 256)}, {"what", e.what()}});
    if (!writer.answered()) {
      send_error_for(request.path, writer, internal_error(std::string("internal error: ") + e.what()));
    }
  }
}

std::optional<std::string> Gateway::caller_scope(const HttpRequest& request) const {
  if (options_.api_keys.empty()) return std::string(Session::kOpenScope);
  std::optional<std::string_view> presented;
  if (auto auth = request.header("authorization")) {
    std::string_view v = *auth;
    if (v.size() > 7 && (v.substr(0, 7) == "Bearer " || v.substr(0, 7) == "bearer ")) presented = v.substr(7);
  }
  if (!presented) presented = request.header("x-api-key");
  if (!presented) return std::nullopt;
  // Every key is compared (no early exit), so timing tells neither which key nor how many.
  const std::string* found = nullptr;
  for (const auto& key : options_.api_keys) {
    if (constant_time_equal(*presented, key) && found == nullptr) found = &key;
  }
  if (found == nullptr) return std::nullopt;
  return scope_of_key(*found);
}

void Gateway::send_error(ResponseWriter& writer, const ApiError& error) { send_api_error(writer, error); }

void Gateway::send_json(ResponseWriter& writer, int status, const json& body) {
  writer.send(status, kJsonHeaders, util::json_text(body));
}

void Gateway::passthrough(const HttpRequest& request, ResponseWriter& writer) {
  if (auto ready = engine_.wait_for_engine([&writer] { return writer.client_gone(); }); !ready.ok()) {
    return send_error(writer, ready.error());
  }
  std::string path = request.path;
  if (!request.query.empty()) path += "?" + request.query;
  auto res = upstream_->call(request.method, path, request.body, std::chrono::seconds(120));
  RequestRecord rec{.route = "passthrough"};
  if (!res.ok()) {
    auto e = engine_.from_upstream_error(res.error());
    rec.status = e.status;
    rec.error_kind = e.code.value_or("upstream");
    send_error(writer, e);
  } else {
    const UpstreamResponse& r = *res;
    rec.status = r.status;
    if (r.status >= 400) {
      send_error(writer, engine_.from_engine_answer(r.status, r.body));
    } else if (request.path == "/slots") {
      // Another conversation's prompt and sampling text never pass (upstream/slot_listing.h).
      auto slots = json::parse(r.body, nullptr, false);
      writer.send(r.status, kJsonHeaders, util::json_text(slots_without_content(slots)));
    } else {
      writer.send(r.status, {{"Content-Type", r.content_type.empty() ? "application/json" : r.content_type}},
                  r.body);
    }
  }
  metrics_.record(rec);
}

void Gateway::health(const HttpRequest&, ResponseWriter& writer) {
  EngineEndpoint ep = upstream_->endpoint();
  const auto q = admission_.stats();
  json body = {{"status", ep.available ? "ok" : "unavailable"},
               {"gateway", "ok"},
               {"engine", {{"state", ep.state}, {"available", ep.available}}},
               {"queue", {{"active", q.active}, {"waiting", q.waiting}}},
               {"session_store", !store_                 ? "none"
                                 : store_failing_.load() ? "failing"
                                                         : "ok"}};
  HeaderList headers = kJsonHeaders;
  if (!ep.available) headers.emplace_back("Retry-After", std::to_string(ep.retry_after_s));
  writer.send(ep.available ? 200 : 503, headers, util::json_text(body));
}

void Gateway::prometheus(const HttpRequest&, ResponseWriter& writer) {
  std::string text = metrics_.prometheus([this](std::string& out) {
    EngineEndpoint ep = upstream_->endpoint();
    out += "# TYPE kvgate_engine_available gauge\n";
    out += fmt::format("kvgate_engine_available{{state=\"{}\"}} {}\n", ep.state, ep.available ? 1 : 0);
    out += "# TYPE kvgate_sessions gauge\n";
    out += fmt::format("kvgate_sessions {}\n", sessions_.size());
    const auto q = admission_.stats();
    out += "# TYPE kvgate_queue_active gauge\n";
    out += fmt::format("kvgate_queue_active {}\n", q.active);
    out += "# TYPE kvgate_queue_waiting gauge\n";
    out += fmt::format("kvgate_queue_waiting {}\n", q.waiting);
    out += "# TYPE kvgate_session_store_failing gauge\n";
    out += fmt::format("kvgate_session_store_failing {}\n", store_failing_.load() ? 1 : 0);
    out += "# TYPE kvgate_sessions_evicted_total counter\n";
    out += fmt::format("kvgate_sessions_evicted_total {}\n", sessions_.evictions());
    const auto ts = tokens_.stats();
    out += "# TYPE kvgate_token_accounting_pieces_tokenized_total counter\n";
    out += fmt::format("kvgate_token_accounting_pieces_tokenized_total {}\n", ts.pieces_tokenized);
    out += "# TYPE kvgate_token_accounting_mismatches_total counter\n";
    out += fmt::format("kvgate_token_accounting_mismatches_total {}\n", ts.mismatches);
    if (kv_) kv_->gauges(out);
  });
  writer.send(200, {{"Content-Type", "text/plain; version=0.0.4"}}, text);
}

void Gateway::status(const HttpRequest& request, ResponseWriter& writer) {
  EngineEndpoint ep = upstream_->endpoint();
  const auto ts = tokens_.stats();
  const std::string scope = caller_scope(request).value_or("");
  // Slot owners of other keys are not named: a session id is the way to a conversation.
  json slots = slots_.to_json();
  for (auto& slot : slots) {
    if (!slot["session"].is_string()) continue;
    auto s = sessions_.in_memory(slot["session"].get<std::string>());
    if (!s || s->scope != scope) slot["session"] = nullptr;
  }
  json body = {
      {"engine", {{"state", ep.state}, {"available", ep.available}, {"port", ep.port}}},
      {"sessions", sessions_.list(scope).size()},
      {"slots", slots},
      {"queue", admission_.to_json()},
      {"session_store",
       !store_ ? json(nullptr) : json{{"path", store_->path().string()}, {"failing", store_failing_.load()}}},
      {"prefill_ms_per_token", engine_.prefill_ms_per_token()},
      {"token_accounting",
       {{"counts", ts.counts},
        {"pieces_tokenized", ts.pieces_tokenized},
        {"chars_tokenized", ts.chars_tokenized},
        {"cache_hits", ts.cache_hits},
        {"mismatches", ts.mismatches},
        {"engine_offset", tokens_.offset()},
        {"estimated", tokens_.estimating()},
        {"counting", counting_name(tokens_.counting())},
        {"estimate_tokens_per_unit", ts.tokens_per_unit ? json(*ts.tokens_per_unit) : json(nullptr)}}},
      {"throughput",
       {{"prefill_ms_per_token", engine_.prefill_ms_per_token()},
        {"recent", metrics_.recent(options_.api_keys.empty() ? std::nullopt : std::optional(scope))}}},
      {"bench_prefill", options_.bench_prefill},
      {"metrics", metrics_.to_json()}};
  if (options_.engine_report) {
    json report = options_.engine_report();
    for (auto& [k, v] : report.items()) {
      if (k == "engine" && v.is_object()) {
        body["engine"].update(v);
      } else {
        body[k] = std::move(v);
      }
    }
  }
  send_json(writer, 200, body);
}

json Gateway::session_json(Session& s) {
  json j = s.to_json();
  if (kv_) j["kv_state"] = kv_->session_info(s.id);
  return j;
}

void Gateway::list_sessions(const HttpRequest& request, ResponseWriter& writer) {
  const std::string prefix = "/kvgate/v1/sessions";
  std::string rest = request.path.substr(prefix.size());
  const std::string scope = caller_scope(request).value_or("");
  if (rest.empty() || rest == "/") {
    json list = json::array();
    for (const auto& s : sessions_.list(scope)) list.push_back(session_json(*s));
    return send_json(writer, 200, {{"object", "list"}, {"data", list}});
  }
  const size_t slash = rest.find('/', 1);
  const std::string id = rest.substr(1, slash == std::string::npos ? std::string::npos : slash - 1);
  auto s = sessions_.get(id, scope);
  if (!s) return send_error(writer, not_found(fmt::format("no session '{}'", shown(id, 200))));
  if (slash != std::string::npos) return session_turns(*s, rest.substr(slash), writer);
  send_json(writer, 200, session_json(*s));
}

}  // namespace kvgate::gateway
