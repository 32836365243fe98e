#include "bench/replay.h"

#include <chrono>

#include <fmt/format.h>
#include <unistd.h>

#include "bench/chat_turn.h"
#include "bench/http_client.h"
#include "bench/local_gateway.h"

namespace kvgate::bench {

using nlohmann::json;

namespace {

// The turn's events among a session listing: those newer than `last_ts` (updated).
json new_compactions(const json& sessions, int64_t& last_ts) {
  json out = json::array();
  int64_t newest = last_ts;
  if (!sessions.is_object() || !sessions.contains("data") || !sessions["data"].is_array()) return out;
  for (const auto& s : sessions["data"]) {
    if (!s.is_object() || !s.contains("compaction_history") || !s["compaction_history"].is_array()) continue;
    for (const auto& ev : s["compaction_history"]) {
      const int64_t ts = ev.value("ts", int64_t{0});
      if (ts <= last_ts) continue;
      newest = std::max(newest, ts);
      json brief = {{"level", ev.value("level", "")},
                    {"trigger", ev.value("trigger", "")},
                    {"tokens_before", ev.value("tokens_before", 0)},
                    {"tokens_after", ev.value("tokens_after", 0)}};
      if (ev.contains("summary_request")) brief["summary_request"] = ev["summary_request"];
      out.push_back(std::move(brief));
    }
  }
  last_ts = newest;
  return out;
}

// Sends one turn and fills status, failure, times and token figures.
void send_turn(HttpClient& client, const json& body, TurnResult& t, std::optional<json>& reply) {
  ChatAnswer a = post_chat(client, body);
  t.request_bytes = a.request_bytes;
  t.status = a.status;
  t.total_ms = a.total_ms;
  t.ttft_ms = a.ttft_ms;
  t.failure = a.failure;
  t.error = a.error;
  reply = std::move(a.reply);
  if (t.ok()) {
    t.prompt_tokens = a.usage.prompt_tokens;
    t.cached_tokens = a.usage.cached_tokens;
    t.prefilled_tokens = a.usage.prefilled_tokens;
  } else {
    t.prompt_tokens = a.overflow_prompt_tokens;
  }
}

// A folder the engine saves slots into (--slot-save-path), removed with its files at the end.
class StateDir {
 public:
  static Result<std::unique_ptr<StateDir>> create() {
    static int counter = 0;
    auto d = std::unique_ptr<StateDir>(new StateDir());
    d->path_ = std::filesystem::temp_directory_path() /
               fmt::format("kvgate-bench-replay-states-{}-{}", ::getpid(), counter++);
    std::error_code ec;
    std::filesystem::remove_all(d->path_, ec);
    if (!std::filesystem::create_directories(d->path_, ec) || ec) {
      return Error(fmt::format("creating {}: {}", d->path_.string(), ec ? ec.message() : "exists"));
    }
    return d;
  }
  ~StateDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  StateDir(const StateDir&) = delete;
  StateDir& operator=(const StateDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  StateDir() = default;
  std::filesystem::path path_;
};

// What one path runs on. The members go in reverse order: the gateway, the engine, then the
// folder its slot files are in.
struct PathRig {
  std::unique_ptr<StateDir> states;  // gateway path with saved conversation states
  std::unique_ptr<LocalEngine> engine;
  std::unique_ptr<LocalGateway> gateway;      // gateway path
  std::unique_ptr<HttpClient> engine_client;  // the engine's counters
  std::unique_ptr<HttpClient> client;         // the turns: to the gateway, or to the engine
  size_t stale_retries = 0;                   // of clients replaced after restarts
};

Result<PathRig> start_rig(const ReplayOptions& options, bool through_gateway, const std::string& name) {
  PathRig rig;
  LocalEngineOptions eo = options.engine;
  if (options.log_dir) eo.log_file = *options.log_dir / fmt::format("engine-{}.log", name);
  LocalGatewayOptions go{.gateway = options.gateway};
  if (through_gateway && options.gateway.kv.disk_budget_bytes > 0) {
    KV_ASSIGN_OR_RETURN(rig.states, StateDir::create());
    eo.extra_args.insert(eo.extra_args.end(), {"--slot-save-path", rig.states->path().string()});
    go.gateway.kv.dir = rig.states->path();
  } else {
    go.gateway.kv = {};
  }
  KV_ASSIGN_OR_RETURN(rig.engine, LocalEngine::start(eo));
  rig.engine_client = std::make_unique<HttpClient>(rig.engine->endpoint(), std::chrono::seconds(120));
  if (through_gateway) {
    static int counter = 0;
    go.store = std::filesystem::temp_directory_path() /
               fmt::format("kvgate-bench-replay-{}-{}.db", ::getpid(), counter++);
    KV_ASSIGN_OR_RETURN(rig.gateway, LocalGateway::start(rig.engine->endpoint(), std::move(go)));
  }
  rig.client = std::make_unique<HttpClient>(rig.gateway ? rig.gateway->endpoint() : rig.engine->endpoint());
  return rig;
}

// Kills the engine once the gateway has finished the turn before (its slot save included)
// and starts a fresh one; the clients and the gateway's upstream are pointed at it.
Status restart_engine(PathRig& rig) {
  if (rig.gateway && !rig.gateway->wait_idle(std::chrono::minutes(5)))
    return Error("restarting the engine: the gateway was still busy with the last turn after 5 minutes");
  KV_TRY(rig.engine->kill_and_restart());
  rig.engine_client = std::make_unique<HttpClient>(rig.engine->endpoint(), std::chrono::seconds(120));
  if (rig.gateway) {
    rig.gateway->engine_restarted(rig.engine->endpoint());
  } else {
    rig.stale_retries += rig.client->stale_retries();
    rig.client = std::make_unique<HttpClient>(rig.engine->endpoint());
  }
  return util::ok_status();
}

// Turn k's request as the path sends it: the trace's (or in --live mode the model's own
// history), with the benchmark's own settings applied; fills t.live, t.stream, t.request_messages.
json turn_body(const Trace& trace, size_t k, const ReplayOptions& options, const json& previous_trace,
               const json& previous_sent, const std::optional<json>& reply, const json& bias, TurnResult& t) {
  const json& recorded = trace.turns[k];
  json body = recorded;
  if (options.live && k > 0) {
    LiveHistory h = live_history(previous_trace, previous_sent, recorded["messages"], reply);
    body["messages"] = std::move(h.messages);
    t.live = h.live;
  }
  if (options.max_tokens) {
    body.erase("max_completion_tokens");
    body["max_tokens"] = *options.max_tokens;
  }
  if (!bias.is_null()) body["logit_bias"] = bias;
  t.stream = options.stream == StreamMode::kForce ? true : recorded.value("stream", false);
  body["stream"] = t.stream;
  if (t.stream) {
    if (!body.contains("stream_options") || !body["stream_options"].is_object())
      body["stream_options"] = json::object();
    body["stream_options"]["include_usage"] = true;
  } else {
    body.erase("stream_options");
  }
  t.request_messages = body["messages"].size();
  return body;
}

// The gateway's figures at the end of the replay: sessions and the cost of its token accounting.
void read_gateway_figures(HttpClient& client, size_t turns, PathResult& result) {
  const auto s = client.get("/kvgate/v1/sessions");
  const json j = s.json();
  if (j.is_object() && j.contains("data") && j["data"].is_array()) result.sessions = j["data"].size();
  const json st = client.get("/kvgate/v1/status").json();
  if (st.is_object() && st.contains("token_accounting") && st.contains("metrics")) {
    const json& ta = st["token_accounting"];
    const double ms = st["metrics"].value("token_accounting_ms_total", 0.0);
    result.accounting = {{"exact_counts", ta.value("counts", uint64_t{0})},
                         {"pieces_tokenized", ta.value("pieces_tokenized", uint64_t{0})},
                         {"chars_tokenized", ta.value("chars_tokenized", uint64_t{0})},
                         {"piece_cache_hits", ta.value("cache_hits", uint64_t{0})},
                         {"ms_total", ms},
                         {"ms_per_turn", turns == 0 ? 0.0 : ms / static_cast<double>(turns)}};
  }
}

Result<PathResult> run_path(const Trace& trace, const ReplayOptions& options, bool through_gateway,
                            size_t& done, size_t total, const ProgressFn& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  PathResult result;
  result.name = through_gateway ? "gateway" : "direct";
  if (progress) progress(done, total, fmt::format("{}: starting the engine", result.name));
  KV_ASSIGN_OR_RETURN(PathRig rig, start_rig(options, through_gateway, result.name));
  result.engine_command = rig.engine->command_line();
  result.saved_states = rig.states != nullptr;
  json bias = nullptr;
  if (options.plain_words) {
    KV_ASSIGN_OR_RETURN(bias, word_bias(*rig.engine_client));
  }
  int64_t last_ts = 0;
  json previous_trace, previous_sent;
  std::optional<json> reply;
  for (size_t k = 0; k < trace.turns.size(); ++k) {
    TurnResult t;
    t.turn = k + 1;
    if (options.restart_every > 0 && k > 0 && k % options.restart_every == 0) {
      if (progress)
        progress(done, total, fmt::format("{}: restarting the engine before turn {}", result.name, k + 1));
      KV_TRY(restart_engine(rig).with_context(fmt::format("{} path, before turn {}", result.name, k + 1)));
      t.after_restart = true;
    }
    json body = turn_body(trace, k, options, previous_trace, previous_sent, reply, bias, t);
    if (progress) {
      progress(done, total,
               fmt::format("{}: turn {}/{} ({} messages)", result.name, k + 1, trace.turns.size(),
                           t.request_messages));
    }
    KV_ASSIGN_OR_RETURN(const EngineCounters before, engine_counters(*rig.engine_client));
    send_turn(*rig.client, body, t, reply);
    KV_ASSIGN_OR_RETURN(const EngineCounters after, engine_counters(*rig.engine_client));
    t.engine_processed = after.processed - before.processed;
    t.engine_cached = after.cached - before.cached;
    t.engine_cached_known = after.cached_known;
    if (rig.gateway) {
      const auto s = rig.client->get("/kvgate/v1/sessions");
      if (s.status == 200) t.compactions = new_compactions(s.json(), last_ts);
    }
    previous_trace = trace.turns[k]["messages"];
    previous_sent = body["messages"];
    result.turns.push_back(std::move(t));
    ++done;
  }
  if (rig.gateway) read_gateway_figures(*rig.client, trace.turns.size(), result);
  result.stale_retries = rig.stale_retries + rig.client->stale_retries();
  result.summary = summarize_path(result.turns);
  result.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace

const PathResult* ReplayReport::path(std::string_view name) const {
  for (const auto& p : paths) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

PathSummary summarize_path(const std::vector<TurnResult>& turns) {
  PathSummary s;
  s.turns = turns.size();
  std::vector<double> ttft, total;
  std::vector<double> ttft_after, ttft_other;
  for (const auto& t : turns) {
    total.push_back(t.total_ms);
    if (t.after_restart) s.restart_turns.push_back(t.turn);
    TurnGroup& group = t.after_restart ? s.after_restart : s.other_turns;
    ++group.turns;
    if (t.ok()) {
      ++group.ok;
      group.prompt_tokens += t.prompt_tokens;
      group.cached_tokens += t.cached_tokens;
      group.prefilled_tokens += t.prefilled_tokens;
      if (t.ttft_ms >= 0) (t.after_restart ? ttft_after : ttft_other).push_back(t.ttft_ms);
    }
    s.engine_processed += t.engine_processed;
    s.engine_cached += t.engine_cached;
    s.engine_cached_known = s.engine_cached_known && t.engine_cached_known;
    s.compactions += t.compactions.size();
    if (!t.ok()) {
      ++s.failures[failure_name(t.failure)];
      if (s.first_failure_turn == 0) s.first_failure_turn = t.turn;
      continue;
    }
    ++s.ok;
    s.prompt_tokens += t.prompt_tokens;
    s.cached_tokens += t.cached_tokens;
    s.prefilled_tokens += t.prefilled_tokens;
    if (t.ttft_ms >= 0) ttft.push_back(t.ttft_ms);
  }
  s.prefilled_ratio = s.prompt_tokens == 0
                          ? 0
                          : static_cast<double>(s.prefilled_tokens) / static_cast<double>(s.prompt_tokens);
  const double engine_all = s.engine_processed + s.engine_cached;
  s.engine_processed_ratio = engine_all <= 0 ? 0 : s.engine_processed / engine_all;
  s.ttft_ms = summarize(ttft);
  s.total_ms = summarize(total);
  s.after_restart.ttft_ms = summarize(ttft_after);
  s.other_turns.ttft_ms = summarize(ttft_other);
  return s;
}

json compare_paths(const PathResult& direct, const PathResult& gateway) {
  std::vector<double> d_ttft, g_ttft;
  double d_sum = 0, g_sum = 0;
  uint64_t d_pre = 0, g_pre = 0;
  size_t common = 0;
  const size_t n = std::min(direct.turns.size(), gateway.turns.size());
  for (size_t i = 0; i < n; ++i) {
    const auto& d = direct.turns[i];
    const auto& g = gateway.turns[i];
    if (!d.ok() || !g.ok() || d.ttft_ms < 0 || g.ttft_ms < 0) continue;
    ++common;
    d_ttft.push_back(d.ttft_ms);
    g_ttft.push_back(g.ttft_ms);
    d_sum += d.ttft_ms;
    g_sum += g.ttft_ms;
    d_pre += d.prefilled_tokens;
    g_pre += g.prefilled_tokens;
  }
  auto ratio = [](double a, double b) { return b > 0 ? json(a / b) : json(nullptr); };
  return {{"turns_both_answered", common},
          {"ttft_sum_ratio", ratio(g_sum, d_sum)},
          {"ttft_p50_ratio", common ? ratio(median(g_ttft), median(d_ttft)) : json(nullptr)},
          {"prefilled_ratio", ratio(static_cast<double>(g_pre), static_cast<double>(d_pre))},
          {"direct_ttft_sum_ms", d_sum},
          {"gateway_ttft_sum_ms", g_sum}};
}

Result<ReplayReport> run_replay(const Trace& trace, const ReplayOptions& options,
                                const ProgressFn& progress) {
  if (!options.direct && !options.through_gateway)
    return Error("nothing to replay: neither path is selected");
  const auto t0 = std::chrono::steady_clock::now();
  ReplayReport report;
  report.trace = trace.name;
  report.restart_every = options.restart_every;
  report.saved_states_off = options.saved_states_off;
  report.options = {{"turns", trace.turns.size()},
                    {"context", options.engine.context},
                    {"slots", options.engine.slots},
                    {"model", options.engine.model.string()},
                    {"engine_args", options.engine.extra_args},
                    {"live", options.live},
                    {"max_tokens", options.max_tokens ? json(*options.max_tokens) : json("as in the trace")},
                    {"plain_words", options.plain_words},
                    {"stream", options.stream == StreamMode::kForce ? "always" : "as in the trace"}};
  if (options.restart_every > 0) {
    report.options["restart_every"] = options.restart_every;
    report.options["gateway_saved_states"] =
        options.gateway.kv.disk_budget_bytes > 0 ? json("on") : json("off: " + options.saved_states_off);
  }
  const size_t total =
      trace.turns.size() * ((options.direct ? 1U : 0U) + (options.through_gateway ? 1U : 0U));
  size_t done = 0;
  if (options.direct) {
    KV_ASSIGN_OR_RETURN(auto p, run_path(trace, options, false, done, total, progress));
    report.paths.push_back(std::move(p));
  }
  if (options.through_gateway) {
    KV_ASSIGN_OR_RETURN(auto p, run_path(trace, options, true, done, total, progress));
    report.paths.push_back(std::move(p));
  }
  report.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return report;
}

}  // namespace kvgate::bench
