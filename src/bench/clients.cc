#include "bench/clients.h"

#include <chrono>
#include <map>

#include <fmt/format.h>
#include <unistd.h>

#include "bench/chat_turn.h"
#include "bench/engine_queries.h"
#include "bench/local_gateway.h"
#include "bench/tool_model.h"
#include "util/json.h"

namespace kvgate::bench {

using nlohmann::json;

namespace {

// What the session listing said after the previous turn.
struct SessionsSeen {
  std::map<std::string, uint64_t> requests;  // per session
  std::map<std::string, int64_t> last_ts;    // newest compaction event seen, per session
};

json brief_event(const json& ev) {
  json out = {{"level", ev.value("level", "")},
              {"trigger", ev.value("trigger", "")},
              {"tokens_before", ev.value("tokens_before", 0)},
              {"tokens_after", ev.value("tokens_after", 0)},
              {"dropped_messages", ev.value("dropped_messages", 0)},
              {"truncated_messages", ev.value("truncated_messages", 0)}};
  for (const char* key : {"summary_source", "summary_error", "summary_request"}) {
    if (ev.contains(key)) out[key] = ev[key];
  }
  return out;
}

// The session that served the turn just sent (the one whose request count grew) and the
// compactions it ran.
void observe_sessions(const json& listing, SessionsSeen& seen, ClientTurnResult& t) {
  if (!listing.is_object() || !listing.contains("data") || !listing["data"].is_array()) return;
  uint64_t grew = 0;
  const json* served = nullptr;
  for (const auto& s : listing["data"]) {
    if (!s.is_object() || !s.contains("id") || !s["id"].is_string()) continue;
    const std::string id = s["id"];
    const uint64_t requests = s.value("requests", uint64_t{0});
    uint64_t& before = seen.requests[id];
    if (requests > before && requests - before > grew) {
      grew = requests - before;
      served = &s;
    }
    before = requests;
  }
  if (served == nullptr) return;
  t.session = (*served)["id"];
  int64_t& last = seen.last_ts[t.session];
  int64_t newest = last;
  if (served->contains("compaction_history") && (*served)["compaction_history"].is_array()) {
    for (const auto& ev : (*served)["compaction_history"]) {
      const int64_t ts = ev.value("ts", int64_t{0});
      if (ts <= last) continue;
      newest = std::max(newest, ts);
      t.compactions.push_back(brief_event(ev));
    }
  }
  last = newest;
}

// An engine and what the harness asks it directly.
struct EngineRig {
  std::unique_ptr<LocalEngine> engine;
  std::unique_ptr<HttpClient> client;              // counting, counters
  std::shared_ptr<gateway::Upstream> upstream;     // tool turns (tool_model.h), the gateway's upstream
  json bias = nullptr;                             // plain words
};

// What one run runs on: an engine, the gateway (gateway path) and the client of the turns.
struct Rig {
  EngineRig* engine = nullptr;
  std::unique_ptr<LocalGateway> gateway;
  std::unique_ptr<HttpClient> client;
};

Result<std::unique_ptr<EngineRig>> start_engine(const ClientsOptions& o, int slots, const std::string& name) {
  auto rig = std::make_unique<EngineRig>();
  LocalEngineOptions eo = o.engine;
  eo.slots = slots;
  eo.context = o.context * static_cast<uint64_t>(slots);
  if (o.log_dir) eo.log_file = *o.log_dir / fmt::format("engine-{}.log", name);
  KV_ASSIGN_OR_RETURN(rig->engine, LocalEngine::start(eo));
  rig->client = std::make_unique<HttpClient>(rig->engine->endpoint(), std::chrono::seconds(600));
  const Endpoint e = rig->engine->endpoint();
  rig->upstream = std::make_shared<gateway::HttpUpstream>(
      [e] { return gateway::EngineEndpoint{.host = e.host, .port = e.port, .api_key = e.api_key}; });
  if (o.plain_words) {
    KV_ASSIGN_OR_RETURN(rig->bias, word_bias(*rig->client));
  }
  return rig;
}

Result<Rig> start_rig(const ClientsOptions& o, EngineRig& engine, int slots, bool through_gateway) {
  Rig rig{.engine = &engine};
  if (through_gateway) {
    static int counter = 0;
    LocalGatewayOptions go{.gateway = o.gateway};
    go.gateway.slots = slots;
    go.gateway.kv = {};
    go.store = std::filesystem::temp_directory_path() /
               fmt::format("kvgate-bench-clients-{}-{}.db", ::getpid(), counter++);
    KV_ASSIGN_OR_RETURN(rig.gateway, LocalGateway::start(std::make_shared<ToolModelUpstream>(engine.upstream), std::move(go)));
  }
  rig.client = std::make_unique<HttpClient>(rig.gateway ? rig.gateway->endpoint() : engine.engine->endpoint());
  return rig;
}

// The client's request counted with the engine's template and tokenizer: all of it, from its
// increment on, from its first rewritten message on. A request the template refuses is
// estimated by bytes (4 per token), and the turn says so.
void count_request(HttpClient& engine, const ClientTurn& ct, ClientTurnResult& r) {
  const json& messages = ct.body["messages"];
  const json tools = ct.body.contains("tools") ? ct.body["tools"] : json(nullptr);
  auto count = [&](size_t from) -> uint64_t {
    json part = json::array();
    for (size_t i = 0; i < from && i < messages.size(); ++i) part.push_back(messages[i]);
    auto n = prompt_tokens(engine, part, tools);
    if (n.ok()) return *n;
    r.notes.push_back("counted by bytes: " + n.error().message().substr(0, 200));
    return estimated_tokens(util::json_text(part));
  };
  r.client_tokens = count(messages.size());
  if (ct.increment_from) r.increment_tokens = r.client_tokens - std::min(r.client_tokens, count(*ct.increment_from));
  if (ct.rewritten_from) r.rewrite_tokens = r.client_tokens - std::min(r.client_tokens, count(*ct.rewritten_from));
}

ClientTurnResult turn_result(const ClientTurn& ct, size_t client, size_t request) {
  ClientTurnResult r;
  r.client = client;
  r.turn = ct.number;
  r.request = request;
  r.kind = ct.kind;
  r.new_conversation = ct.new_conversation;
  r.carries_reply = ct.carries_reply;
  r.notes = ct.notes;
  r.asks_tool_call = ct.asks_tool_call;
  r.request_messages = ct.body["messages"].size();
  return r;
}

void take_answer(const ChatAnswer& a, ClientTurnResult& r) {
  r.status = a.status;
  r.failure = a.failure;
  r.error = a.error;
  r.request_bytes = a.request_bytes;
  r.total_ms = a.total_ms;
  if (a.ok()) {
    r.prompt_tokens = a.usage.prompt_tokens;
    r.cached_tokens = a.usage.cached_tokens;
    r.prefilled_tokens = a.usage.prefilled_tokens;
    r.completion_tokens = a.usage.completion_tokens;
  } else {
    r.prompt_tokens = a.overflow_prompt_tokens;
  }
  if (a.reply && a.reply->contains("tool_calls") && (*a.reply)["tool_calls"].is_array()) {
    r.tool_calls = (*a.reply)["tool_calls"].size();
  }
}

// A turn straight to the engine that requires a tool call is answered by the tool model, as
// the gateway's upstream answers it on the gateway path; everything else is sent as it is.
ChatAnswer send(Rig& rig, const json& body) {
  if (rig.gateway || !requires_tool_call(body)) return post_chat(*rig.client, body);
  const auto t0 = std::chrono::steady_clock::now();
  const gateway::UpstreamResponse r = answer_with_calls(*rig.engine->upstream, body);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ChatAnswer a = read_chat_answer(r.status, r.body, "", ms);
  a.request_bytes = util::json_text(body).size();
  return a;
}

std::string run_name(const ClientSpec& spec, uint64_t seed, bool through_gateway) {
  return fmt::format("{}-s{}-{}", spec.name, seed, through_gateway ? "gateway" : "direct");
}

// Keeps a failed request and its answer under <log_dir>/failed/.
void save_failed(const ClientsOptions& o, const std::string& name, const ClientTurnResult& r, const json& body) {
  if (!o.log_dir) return;
  auto dir = OutputDir::open(*o.log_dir / "failed");
  if (!dir) return;
  const json record = {{"run", name},        {"client", r.client},         {"turn", r.turn},
                       {"status", r.status}, {"result", failure_name(r.failure)}, {"error", r.error},
                       {"request", body}};
  (void)dir->write(fmt::format("{}-c{}-t{}.json", name, r.client, r.turn), util::json_text(record, 1) + "\n");
}

// The engines of a run_clients call: one per run, or with reuse_engines one per slot count.
class Engines {
 public:
  explicit Engines(const ClientsOptions& o) : o_(o) {}
  Result<EngineRig*> get(int slots, const std::string& name) {
    if (!o_.reuse_engines) kept_.clear();
    auto& e = kept_[slots];
    if (!e) {
      KV_ASSIGN_OR_RETURN(e, start_engine(o_, slots, o_.reuse_engines ? fmt::format("{}-slots", slots) : name));
    }
    return e.get();
  }

 private:
  const ClientsOptions& o_;
  std::map<int, std::unique_ptr<EngineRig>> kept_;
};

Result<ClientRun> run_one(const ClientsOptions& o, Engines& engines, const ClientSpec& spec, uint64_t seed,
                          bool through_gateway, size_t& done, size_t total, const ProgressFn& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string name = run_name(spec, seed, through_gateway);
  ClientRun run{.behaviour = spec.name,
                .seed = seed,
                .path = through_gateway ? "gateway" : "direct",
                .clients = std::max<size_t>(1, spec.parallel),
                .marks = watermarks(o.gateway, o.context, spec),
                .engine_shifts = o.gateway.engine_shifts};
  if (progress) progress(done, total, name + ": starting the engine");
  const int slots = static_cast<int>(run.clients);
  KV_ASSIGN_OR_RETURN(EngineRig * engine, engines.get(slots, name));
  KV_ASSIGN_OR_RETURN(Rig rig, start_rig(o, *engine, slots, through_gateway));
  std::vector<ClientSim> sims;
  for (size_t c = 0; c < run.clients; ++c) sims.emplace_back(spec, seed, c);
  std::vector<std::optional<json>> replies(run.clients);
  SessionsSeen seen;
  for (size_t turn = 1; turn <= o.turns; ++turn) {
    for (size_t c = 0; c < run.clients; ++c) {
      const ClientTurn ct = sims[c].next(replies[c]);
      ClientTurnResult r = turn_result(ct, c, run.turns.size() + 1);
      if (progress) progress(done, total, fmt::format("{}: client {} turn {}/{} ({})", name, c, turn, o.turns, ct.kind));
      count_request(*engine->client, ct, r);
      json body = ct.body;
      if (!engine->bias.is_null()) body["logit_bias"] = engine->bias;
      KV_ASSIGN_OR_RETURN(const EngineCounters before, engine_counters(*engine->client));
      const ChatAnswer a = send(rig, body);
      KV_ASSIGN_OR_RETURN(const EngineCounters after, engine_counters(*engine->client));
      take_answer(a, r);
      r.engine_processed = after.processed - before.processed;
      r.engine_cached = after.cached - before.cached;
      r.engine_cached_known = after.cached_known;
      if (rig.gateway) observe_sessions(rig.client->get("/kvgate/v1/sessions").json(), seen, r);
      if (!r.ok()) save_failed(o, name, r, body);
      replies[c] = a.reply;
      run.turns.push_back(std::move(r));
      ++done;
    }
  }
  run.figures = summarize_run(run);
  if (through_gateway) run.violations = check_properties(run);
  run.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return run;
}

}  // namespace

Watermarks watermarks(const gateway::GatewayOptions& g, uint64_t context, const ClientSpec& spec) {
  const uint64_t high =
      g.high_watermark_tokens.value_or(static_cast<uint64_t>(static_cast<double>(context) * g.high_watermark_fraction));
  return {.high = high,
          .low = static_cast<uint64_t>(static_cast<double>(high) * g.low_watermark_fraction),
          .reserve = spec.max_tokens > 0 ? static_cast<uint64_t>(spec.max_tokens) : g.reply_reserve_tokens};
}

Result<ClientsReport> run_clients(const ClientsOptions& o, const ProgressFn& progress) {
  if (!o.direct && !o.through_gateway) return Error("nothing to run: neither path is selected");
  if (o.behaviours.empty() || o.seeds.empty() || o.turns == 0) return Error("nothing to run: no behaviour, seed or turn");
  const auto t0 = std::chrono::steady_clock::now();
  ClientsReport report;
  json names = json::array();
  for (const auto& s : o.behaviours) names.push_back(s.name);
  const Watermarks m = watermarks(o.gateway, o.context, o.behaviours.front());
  report.options = {{"context", o.context},
                    {"turns", o.turns},
                    {"seeds", o.seeds},
                    {"behaviours", names},
                    {"plain_words", o.plain_words},
                    {"paths", o.direct && o.through_gateway ? "both" : o.direct ? "direct" : "gateway"},
                    {"model", o.engine.model.string()},
                    {"engine_args", o.engine.extra_args},
                    {"high_watermark", m.high},
                    {"low_watermark", m.low}};
  size_t total = 0;
  for (const auto& s : o.behaviours) total += std::max<size_t>(1, s.parallel) * o.turns;
  total *= o.seeds.size() * ((o.direct ? 1U : 0U) + (o.through_gateway ? 1U : 0U));
  size_t done = 0;
  Engines engines(o);
  for (const auto& spec : o.behaviours) {
    for (uint64_t seed : o.seeds) {
      for (bool through_gateway : {false, true}) {
        if (through_gateway ? !o.through_gateway : !o.direct) continue;
        KV_ASSIGN_OR_RETURN(ClientRun run, run_one(o, engines, spec, seed, through_gateway, done, total, progress)
                                               .with_context(run_name(spec, seed, through_gateway)));
        report.runs.push_back(std::move(run));
      }
    }
  }
  report.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return report;
}

}  // namespace kvgate::bench
