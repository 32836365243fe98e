// Fleet: kvgate in front of several engines (`kvgate serve --upstream A --upstream B ...`).
//
// Each engine gets a whole Gateway of its own (sessions, slots, admission, compaction,
// rescue, its own session store): what one gateway does for one engine is unchanged. The
// Fleet sits in front of them and decides, per request, which one serves it:
//
//   - A conversation stays on the engine that holds its prefix (its KV cache). The request's
//     clues (affinity.h: its conversation name, its previous_response_id, fingerprints of
//     its messages) name a conversation the Fleet has seen, and the Router (router.h) keeps
//     each conversation pinned to one engine while that engine is up.
//   - A new conversation goes where bounded-load consistent hashing puts it (the least
//     loaded engines first).
//   - Engines are taken out when their health probes fail (report_probe) or when a request
//     finds them gone; they rejoin after staying healthy (RouterOptions::rejoin_after).
//   - Failover: an engine that cannot be reached before anything was answered (its gateway
//     answers 502 or 503 without having sent a byte) costs the client nothing: the request
//     is served by the next engine the Router picks, with one full prefill there. A streamed
//     answer that had begun when its engine died ends with the in-stream error one gateway
//     gives.
//   - Routing never decides isolation: the gateway that receives a request recognises its
//     conversation, or not, exactly as it would alone; a wrong guess costs a prefill.
//
// Routes: the conversation routes (chat completions, Messages, Responses, completions) as
// above; GET /health, /metrics, /kvgate/v1/status and /kvgate/v1/sessions gather every
// engine's answer (per-engine labels and entries); a session or stored response by id is
// asked of each gateway in turn; everything else goes to the first engine that is up.
// `Routing::kRoundRobin` (a baseline for measurements) sends each request to the next engine
// in turn, ignoring affinity.
//
// Thread-safety: handle() is called concurrently from connection threads; report_probe()
// from health watch threads.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "fleet/affinity.h"
#include "fleet/fleet_writers.h"
#include "fleet/router.h"
#include "http/http_server.h"

namespace kvgate::gateway {

enum class Routing { kAffinity, kRoundRobin };
std::optional<Routing> parse_routing(std::string_view text);  // "affinity", "round-robin"

struct FleetMember {
  std::string name;  // the engine's address, as shown in reports
  // Its gateway's request handler and head check (Gateway::handle, Gateway::check_head): all
  // the fleet knows of it, so that nothing here depends on how a gateway serves a request.
  http::Handler handle;
  http::HeadCheck check_head;
  double weight = 1;                // its share of new conversations (e.g. its slots)
  std::function<void()> probe_now;  // asks its health watch to look at once (may be empty)
};

struct FleetOptions {
  Routing routing = Routing::kAffinity;
  RouterOptions router;
  size_t max_conversations = 65536;  // remembered for affinity (least recently used forgotten)
};

class Fleet {
 public:
  // REQUIRES: `members` non-empty, names unique.
  Fleet(std::vector<FleetMember> members, FleetOptions options);

  void handle(const http::HttpRequest& request, http::ResponseWriter& writer);
  // The head check of the first gateway (they share keys and routes).
  http::HeadVerdict check_head(const http::HttpRequest& head) const;
  // A health probe's outcome for member `i` (from its watch).
  void report_probe(size_t i, bool ok);
  // Records that the response `id` (Responses API) belongs to the conversation being served
  // on this thread (GatewayOptions::on_response_stored).
  void response_stored(const std::string& id);
  Router& router() { return router_; }

 private:
  void conversation(const http::HttpRequest& request, http::ResponseWriter& writer);
  // The conversation key of a request's clues (new when nothing is known); `how` says why.
  std::string conversation_key(const RequestClues& clues, const char*& how);
  std::optional<size_t> choose(const std::string& key);
  void remember(const std::string& key, const RequestClues& clues);
  void health(const http::HttpRequest& request, http::ResponseWriter& writer);
  void metrics(const http::HttpRequest& request, http::ResponseWriter& writer);
  void status(const http::HttpRequest& request, http::ResponseWriter& writer);
  void sessions(const http::HttpRequest& request, http::ResponseWriter& writer);
  // Every member's answer to `request` (the routes whose answers the Fleet gathers).
  std::vector<HeldAnswer> ask_each(const http::HttpRequest& request, http::ResponseWriter& writer) const;
  // The first member's answer that is not a 404 (a session or response by id).
  void first_found(const http::HttpRequest& request, http::ResponseWriter& writer);
  size_t first_up() const;
  std::string fleet_metrics() const;

  std::vector<FleetMember> members_;
  const FleetOptions options_;
  Router router_;
  std::atomic<uint64_t> round_robin_{0};
  mutable std::mutex mu_;
  uint64_t serial_ = 0;                                         // guarded by mu_; keys of new conversations
  AffinityIndex index_;                                         // guarded by mu_
  std::unordered_map<std::string, std::string> response_keys_;  // guarded by mu_; scope + response id → key
  std::deque<std::string> response_order_;                      // guarded by mu_; oldest first
  std::unordered_map<std::string, uint64_t> routed_;            // guarded by mu_; by how
  std::vector<uint64_t> failovers_;                             // guarded by mu_; per member
};

}  // namespace kvgate::gateway
