#include "fleet/fleet.h"

#include <fmt/format.h>

#include "fleet/fleet_writers.h"
#include "gateway/api_error.h"
#include "gateway/json_headers.h"
#include "gateway/path_error.h"
#include "util/json.h"
#include "util/log.h"

namespace kvgate::gateway {
namespace {

using http::HttpRequest;
using http::ResponseWriter;
using nlohmann::json;

bool is_conversation_route(const HttpRequest& r) {
  return r.method == "POST" &&
         (r.path == "/v1/chat/completions" || r.path == "/v1/messages" || r.path == "/v1/responses" ||
          r.path == "/v1/responses/compact" || r.path == "/v1/completions");
}

// The conversation whose request this thread is serving, and the scope of its key (for
// Fleet::response_stored: a stored response leads back to its conversation only under the
// key that stored it).
struct Serving {
  const std::string* key = nullptr;
  const std::string* scope = nullptr;
};
thread_local Serving serving;

std::vector<Router::Upstream> router_upstreams(const std::vector<FleetMember>& members) {
  std::vector<Router::Upstream> out;
  for (const auto& m : members) out.push_back({m.name, m.weight});
  return out;
}

}  // namespace

std::optional<Routing> parse_routing(std::string_view text) {
  if (text == "affinity") return Routing::kAffinity;
  if (text == "round-robin") return Routing::kRoundRobin;
  return std::nullopt;
}

Fleet::Fleet(std::vector<FleetMember> members, FleetOptions options)
    : members_(std::move(members)),
      options_(std::move(options)),
      router_(router_upstreams(members_), options_.router),
      index_(options_.max_conversations),
      failovers_(members_.size(), 0) {}

http::HeadVerdict Fleet::check_head(const HttpRequest& head) const {
  return members_.front().check_head(head);
}

void Fleet::report_probe(size_t i, bool ok) {
  const auto now = std::chrono::steady_clock::now();
  if (ok) {
    router_.report_success(i, now);
  } else {
    router_.report_failure(i, now);
  }
}

void Fleet::handle(const HttpRequest& request, ResponseWriter& writer) {
  const std::string& p = request.path;
  if (is_conversation_route(request)) return conversation(request, writer);
  if (request.method == "GET" && p == "/health") return health(request, writer);
  if (request.method == "GET" && p == "/metrics") return metrics(request, writer);
  if (request.method == "GET" && p == "/kvgate/v1/status") return status(request, writer);
  if (request.method == "GET" && (p == "/kvgate/v1/sessions" || p == "/kvgate/v1/sessions/")) {
    return sessions(request, writer);
  }
  if (p.starts_with("/kvgate/v1/sessions/") || (request.method == "GET" && p.starts_with("/v1/responses/"))) {
    return first_found(request, writer);
  }
  members_[first_up()].handle(request, writer);
}

size_t Fleet::first_up() const {
  for (size_t i = 0; i < members_.size(); ++i) {
    if (router_.up(i)) return i;
  }
  return 0;
}

std::string Fleet::conversation_key(const RequestClues& clues, const char*& how) {
  std::lock_guard lock(mu_);
  std::string key;
  auto prev = clues.previous_response ? response_keys_.find(*clues.previous_response) : response_keys_.end();
  if (prev != response_keys_.end()) {
    how = "previous_response";
    key = prev->second;
  } else if (clues.name) {
    how = "name";
    key = "name:" + *clues.name;
  } else if (auto known = index_.find(clues.fingerprints)) {
    how = "messages";
    key = std::move(*known);
  } else {
    how = "new";
    key = fmt::format("c{}", ++serial_);
  }
  ++routed_[how];
  return key;
}

std::optional<size_t> Fleet::choose(const std::string& key) {
  if (options_.routing == Routing::kRoundRobin) {
    for (size_t tries = 0; tries < members_.size(); ++tries) {
      const size_t i = static_cast<size_t>(round_robin_++ % members_.size());
      if (router_.up(i)) return i;
    }
    return std::nullopt;
  }
  auto placed = router_.place(key);
  if (!placed) return std::nullopt;
  if (placed->moved()) {
    util::log_event(util::LogLevel::kInfo, "conversation_moved",
                    {{"from", members_[*placed->moved_from].name}, {"to", members_[placed->upstream].name}});
  }
  return placed->upstream;
}

void Fleet::remember(const std::string& key, const RequestClues& clues) {
  std::vector<std::string> forgotten;
  {
    std::lock_guard lock(mu_);
    forgotten = index_.record(key, clues.fingerprints);
  }
  for (const auto& k : forgotten) router_.forget(k);
}

void Fleet::response_stored(const std::string& id) {
  if (!serving.key) return;
  std::string scoped = *serving.scope + "\x1f" + id;
  std::lock_guard lock(mu_);
  if (response_keys_.insert_or_assign(scoped, *serving.key).second)
    response_order_.push_back(std::move(scoped));
  while (response_order_.size() > options_.max_conversations) {
    response_keys_.erase(response_order_.front());
    response_order_.pop_front();
  }
}

void Fleet::conversation(const HttpRequest& request, ResponseWriter& writer) {
  const json body = json::parse(request.body, nullptr, false);
  const RequestClues clues = clues_of(request, body);
  const char* how = "new";
  const std::string key = conversation_key(clues, how);
  std::optional<HeldAnswer> held;
  for (size_t attempt = 0; attempt < members_.size(); ++attempt) {
    const auto target = choose(key);
    if (!target) break;
    const size_t i = *target;
    FailoverWriter out(writer, attempt + 1 < members_.size());
    serving = {&key, &clues.scope};
    members_[i].handle(request, out);
    serving = {};
    if (!out.held()) {
      const bool answered = out.status() >= 200 && out.status() < 300;
      if (options_.routing == Routing::kAffinity && answered) {
        remember(key, clues);
      } else if (!answered && std::string_view(how) == "new") {
        router_.forget(key);  // a refused first request leaves no conversation to keep
      }
      return;
    }
    // Its engine could not be reached before anything was answered: take it out, try the next.
    held = out.take_held();
    router_.set_down(i, std::chrono::steady_clock::now());
    if (members_[i].probe_now) members_[i].probe_now();
    {
      std::lock_guard lock(mu_);
      ++failovers_[i];
    }
    util::log_event(util::LogLevel::kWarn, "upstream_failover",
                    {{"upstream", members_[i].name}, {"status", held->status}, {"attempt", attempt + 1}});
  }
  if (std::string_view(how) == "new") router_.forget(key);
  if (held) return held->send_to(writer);
  send_error_for(request.path, writer, unavailable("no engine is up; retry shortly", 2));
}

std::vector<HeldAnswer> Fleet::ask_each(const HttpRequest& request, ResponseWriter& writer) const {
  std::vector<HeldAnswer> answers;
  for (const auto& m : members_) {
    CapturedAnswer a(writer);
    m.handle(request, a);
    answers.push_back(a.take());
  }
  return answers;
}

namespace {

// The first answer that is not a 200 (e.g. a 401: the same from every member).
const HeldAnswer* first_refusal(const std::vector<HeldAnswer>& answers) {
  for (const auto& a : answers) {
    if (a.status != 200) return &a;
  }
  return nullptr;
}

}  // namespace

void Fleet::first_found(const HttpRequest& request, ResponseWriter& writer) {
  for (size_t i = 0; i + 1 < members_.size(); ++i) {
    CapturedAnswer a(writer);
    members_[i].handle(request, a);
    if (a.status() != 404) return a.take().send_to(writer);
  }
  members_.back().handle(request, writer);
}

void Fleet::health(const HttpRequest& request, ResponseWriter& writer) {
  const auto answers = ask_each(request, writer);
  json upstreams = json::array();
  bool any_up = false;
  for (size_t i = 0; i < members_.size(); ++i) {
    const bool routed = router_.up(i);
    any_up = any_up || (routed && answers[i].status == 200);
    upstreams.push_back({{"upstream", members_[i].name},
                         {"routed", routed},
                         {"health", json::parse(answers[i].body, nullptr, false)}});
  }
  json body = {{"status", any_up ? "ok" : "unavailable"}, {"gateway", "ok"}, {"upstreams", upstreams}};
  http::HeaderList headers = kJsonHeaders;
  if (!any_up) headers.emplace_back("Retry-After", "2");
  writer.send(any_up ? 200 : 503, headers, util::json_text(body));
}

void Fleet::status(const HttpRequest& request, ResponseWriter& writer) {
  const auto answers = ask_each(request, writer);
  if (const auto* refused = first_refusal(answers)) return refused->send_to(writer);
  const auto stats = router_.stats();
  std::lock_guard lock(mu_);
  json upstreams = json::array();
  for (size_t i = 0; i < members_.size(); ++i) {
    const json routing = {{"up", stats[i].up},
                          {"conversations", stats[i].pinned},
                          {"placements", stats[i].placements},
                          {"moves_in", stats[i].moves_in},
                          {"moves_out", stats[i].moves_out},
                          {"downs", stats[i].downs},
                          {"failovers", failovers_[i]}};
    upstreams.push_back({{"upstream", members_[i].name},
                         {"routing", routing},
                         {"status", json::parse(answers[i].body, nullptr, false)}});
  }
  // The top level is the first engine's status, as a one-engine status page reads it.
  json body = upstreams[0]["status"].is_object() ? upstreams[0]["status"] : json::object();
  body["upstreams"] = std::move(upstreams);
  body["routing"] = {{"policy", options_.routing == Routing::kAffinity ? "affinity" : "round-robin"},
                     {"conversations_remembered", index_.conversations()},
                     {"routed", routed_}};
  writer.send(200, kJsonHeaders, util::json_text(body));
}

void Fleet::sessions(const HttpRequest& request, ResponseWriter& writer) {
  const auto answers = ask_each(request, writer);
  if (const auto* refused = first_refusal(answers)) return refused->send_to(writer);
  json data = json::array();
  for (size_t i = 0; i < members_.size(); ++i) {
    json list = json::parse(answers[i].body, nullptr, false);
    if (!list.is_object() || !list.contains("data") || !list["data"].is_array()) continue;
    for (auto& s : list["data"]) {
      s["upstream"] = members_[i].name;
      data.push_back(std::move(s));
    }
  }
  writer.send(200, kJsonHeaders, util::json_text(json{{"object", "list"}, {"data", data}}));
}

void Fleet::metrics(const HttpRequest& request, ResponseWriter& writer) {
  const auto answers = ask_each(request, writer);
  if (const auto* refused = first_refusal(answers)) return refused->send_to(writer);
  std::vector<std::pair<std::string, std::string>> texts;
  for (size_t i = 0; i < members_.size(); ++i) texts.emplace_back(members_[i].name, answers[i].body);
  writer.send(200, {{"Content-Type", "text/plain; version=0.0.4"}},
              merge_prometheus(texts) + fleet_metrics());
}

std::string Fleet::fleet_metrics() const {
  std::string out;
  // One family with a sample per member.
  auto family = [&](const char* name, const char* type, const char* help, auto value_of) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
    for (size_t i = 0; i < members_.size(); ++i) {
      out += fmt::format("{}{{{}}} {}\n", name, upstream_label(members_[i].name), value_of(i));
    }
  };
  const auto stats = router_.stats();
  family("kvgate_upstream_routed", "gauge", "Whether the engine takes conversations (1) or is out (0).",
         [&](size_t i) { return stats[i].up ? 1 : 0; });
  family("kvgate_upstream_conversations", "gauge", "Conversations pinned to the engine.",
         [&](size_t i) { return stats[i].pinned; });
  family("kvgate_upstream_downs_total", "counter", "Times the engine was taken out.",
         [&](size_t i) { return stats[i].downs; });
  family("kvgate_upstream_moves_total", "counter",
         "Conversations moved off a down engine, by engine they left.",
         [&](size_t i) { return stats[i].moves_out; });
  std::lock_guard lock(mu_);
  family("kvgate_upstream_failovers_total", "counter",
         "Requests served elsewhere because the engine could not be reached.",
         [&](size_t i) { return failovers_[i]; });
  out += "# HELP kvgate_routed_total Conversation requests by how their engine was chosen.\n";
  out += "# TYPE kvgate_routed_total counter\n";
  for (const auto& [how, n] : routed_) out += fmt::format("kvgate_routed_total{{how=\"{}\"}} {}\n", how, n);
  return out;
}

}  // namespace kvgate::gateway
