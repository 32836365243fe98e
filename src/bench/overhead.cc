#include "bench/overhead.h"

#include <chrono>
#include <deque>
#include <random>
#include <unordered_map>

#include <fmt/format.h>
#include <unistd.h>

#include "bench/engine_queries.h"
#include "bench/local_gateway.h"
#include "bench/timing_upstream.h"
#include "upstream/reply.h"
#include "util/json.h"

namespace kvgate::bench {

using nlohmann::json;

namespace {

constexpr std::string_view kChatPath = "/v1/chat/completions";

constexpr const char* kLongWords[] = {
    " information",   " development",    " international", " performance",    " understanding",
    " environment",   " management",     " government",    " experience",     " technology",
    " university",    " community",      " application",   " relationship",   " communication",
    " organization",  " significant",    " particularly",  " requirements",   " responsibility",
    " configuration", " implementation", " documentation", " infrastructure", " approximately",
    " independent",   " professional",   " successfully",  " temperature",    " distribution"};

// What the gateway adds upstream, so the direct request renders the same prompt.
json as_gateway_sends(json body) {
  body["chat_template_kwargs"] = {{"enable_thinking", false}};
  body["id_slot"] = 0;
  body["cache_prompt"] = true;
  return body;
}

struct Timed {
  double ms = 0;
  gateway::Usage usage;
};

Result<Timed> send(HttpClient& client, const std::string& body, bool stream, std::string_view path_name) {
  if (stream) {
    StreamedAnswer a = client.post_stream(std::string(kChatPath), body);
    if (a.status != 200 || a.error || !a.done) {
      return Error(fmt::format("{} stream failed: {}", path_name,
                               a.status == 0 ? a.transport_error
                               : a.error     ? a.error->dump()
                                         : fmt::format("HTTP {} {}", a.status, a.error_body.substr(0, 300))));
    }
    return Timed{a.total_ms, a.reply.usage()};
  }
  const HttpAnswer a = client.post(std::string(kChatPath), body);
  if (a.status != 200) {
    return Error(fmt::format(
        "{} request failed: {}", path_name,
        a.status == 0 ? a.transport_error : fmt::format("HTTP {}: {}", a.status, a.body.substr(0, 400))));
  }
  return Timed{a.ms, gateway::usage_from(a.json())};
}

bool served_from_cache(const gateway::Usage& u) {
  return u.known && u.prompt_tokens > 0 &&
         static_cast<double>(u.prefilled_tokens) <= 0.1 * static_cast<double>(u.prompt_tokens) + 8;
}

Result<LatencyCase> latency_case(std::string name, HttpClient& direct, HttpClient& gw,
                                 const json& client_body, int warmup, int reps, size_t& done, size_t total,
                                 const ProgressFn& progress) {
  LatencyCase c;
  c.name = std::move(name);
  const std::string gw_body = util::json_text(client_body);
  const std::string direct_body = util::json_text(as_gateway_sends(client_body));
  const bool stream = client_body.value("stream", false);
  c.request_bytes = gw_body.size();
  for (int i = 0; i < warmup + reps; ++i) {
    if (progress) progress(done, total, fmt::format("{} request, pair {}/{}", c.name, i + 1, warmup + reps));
    Timed d, g;
    if (i % 2 == 0) {
      KV_ASSIGN_OR_RETURN(d, send(direct, direct_body, stream, "direct"));
      KV_ASSIGN_OR_RETURN(g, send(gw, gw_body, stream, "gateway"));
    } else {
      KV_ASSIGN_OR_RETURN(g, send(gw, gw_body, stream, "gateway"));
      KV_ASSIGN_OR_RETURN(d, send(direct, direct_body, stream, "direct"));
    }
    if (d.usage.prompt_tokens != g.usage.prompt_tokens) {
      return Error(fmt::format(
          "{} request: the engine saw {} prompt tokens directly but {} through the gateway (did the "
          "gateway compact it? give the engine a larger context)",
          c.name, d.usage.prompt_tokens, g.usage.prompt_tokens));
    }
    c.prompt_tokens = d.usage.prompt_tokens;
    ++done;
    if (i < warmup) continue;
    if (!served_from_cache(d.usage) || !served_from_cache(g.usage)) ++c.uncached_pairs;
    c.direct_ms.push_back(d.ms);
    c.gateway_ms.push_back(g.ms);
    c.added_ms.push_back(g.ms - d.ms);
  }
  c.direct = summarize(c.direct_ms);
  c.gateway = summarize(c.gateway_ms);
  c.added = summarize(c.added_ms);
  return c;
}

struct StreamRun {
  double ms = 0;
  size_t events = 0;
  std::vector<std::pair<std::string, HttpClient::Clock::time_point>> arrivals;
};

Result<StreamRun> stream_once(HttpClient& client, const std::string& body, std::string_view path_name) {
  StreamRun run;
  auto a = client.post_stream(std::string(kChatPath), body,
                              [&](const http::SseEvent& ev, HttpClient::Clock::time_point t) {
                                if (ev.has_data) run.arrivals.emplace_back(ev.raw, t);
                              });
  if (a.status != 200 || a.error || !a.done) {
    return Error(fmt::format("{} stream failed: {}", path_name,
                             a.status == 0 ? a.transport_error
                             : a.error     ? a.error->dump()
                                       : fmt::format("HTTP {} {}", a.status, a.error_body.substr(0, 300))));
  }
  run.ms = a.total_ms;
  run.events = a.event_ms.size();
  return run;
}

// An event as the client and the engine both see it: the gateway names the model by its id
// where the engine writes its file's path (upstream/model_id.h), so the value is left out.
std::string event_key(std::string_view raw) {
  constexpr std::string_view kModel = "\"model\":\"";
  const size_t at = raw.find(kModel);
  if (at == std::string_view::npos) return std::string(raw);
  const size_t end = raw.find('"', at + kModel.size());
  if (end == std::string_view::npos) return std::string(raw);
  return std::string(raw.substr(0, at + kModel.size())) + std::string(raw.substr(end));
}

Result<StreamCase> stream_case(HttpClient& direct, HttpClient& gw, TimingUpstream& tap, const json& bias,
                               const OverheadOptions& o, size_t& done, size_t total,
                               const ProgressFn& progress) {
  StreamCase c;
  json client_body = {
      {"messages", json::array({{{"role", "system"}, {"content", "You are a helpful assistant."}},
                                {{"role", "user"}, {"content", "Tell me a long story."}}})},
      {"max_tokens", o.stream_tokens},
      {"ignore_eos", true},
      {"temperature", 0},
      {"stream", true},
      {"stream_options", {{"include_usage", true}}},
      {"logit_bias", bias}};
  const std::string gw_body = util::json_text(client_body);
  const std::string direct_body = util::json_text(as_gateway_sends(client_body));
  std::vector<double> events;
  for (int i = 0; i < o.warmup + o.stream_reps; ++i) {
    if (progress)
      progress(done, total, fmt::format("streamed answer, pair {}/{}", i + 1, o.warmup + o.stream_reps));
    StreamRun d, g;
    (void)tap.take();
    if (i % 2 == 0) {
      KV_ASSIGN_OR_RETURN(d, stream_once(direct, direct_body, "direct"));
      KV_ASSIGN_OR_RETURN(g, stream_once(gw, gw_body, "gateway"));
    } else {
      KV_ASSIGN_OR_RETURN(g, stream_once(gw, gw_body, "gateway"));
      KV_ASSIGN_OR_RETURN(d, stream_once(direct, direct_body, "direct"));
    }
    const auto upstream = tap.take();
    ++done;
    if (i < o.warmup) continue;
    std::unordered_map<std::string, std::deque<HttpClient::Clock::time_point>> seen;
    for (const auto& [raw, t] : upstream) seen[event_key(raw)].push_back(t);
    for (const auto& [raw, t] : g.arrivals) {
      auto it = seen.find(event_key(raw));
      if (it == seen.end() || it->second.empty()) {
        ++c.unmatched;
        continue;
      }
      const double us = std::chrono::duration<double, std::micro>(t - it->second.front()).count();
      it->second.pop_front();
      if (raw.rfind("data: [DONE]", 0) == 0) {
        c.done_ms.push_back(us / 1000.0);
      } else {
        c.relay_us.push_back(us);
      }
    }
    ++c.streams;
    events.push_back(static_cast<double>(g.events));
    c.direct_ms.push_back(d.ms);
    c.gateway_ms.push_back(g.ms);
    c.added_ms.push_back(g.ms - d.ms);
  }
  c.events_per_stream = mean(events);
  c.relay = summarize(c.relay_us);
  c.done = summarize(c.done_ms);
  c.added = summarize(c.added_ms);
  return c;
}

}  // namespace

json large_messages(uint64_t bytes) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<size_t> pick(0, std::size(kLongWords) - 1);
  json messages =
      json::array({{{"role", "system"}, {"content", "You are a careful assistant. Answer briefly."}}});
  uint64_t size = util::json_text(messages).size();  // the words need no escaping: sizes add up exactly
  int turn = 0;
  while (size < bytes) {
    std::string text;
    const uint64_t want = std::min<uint64_t>(16384, bytes - size + 64);
    while (text.size() < want) text += kLongWords[pick(rng)];
    json m = {{"role", turn % 2 == 0 ? "user" : "assistant"}, {"content", std::move(text)}};
    size += util::json_text(m).size() + 1;
    messages.push_back(std::move(m));
    ++turn;
  }
  if (messages.back().value("role", "") != "user") {
    messages.push_back({{"role", "user"}, {"content", "Summarise the above in one word."}});
  }
  return messages;
}

uint64_t overhead_context(uint64_t large_bytes) {
  // The long words tokenize at roughly one token per 6-13 bytes; assume 5, keep the
  // request under 60% of the context (the gateway's high watermark is 80%).
  const uint64_t tokens = large_bytes / 5;
  const uint64_t ctx = tokens * 10 / 6 + 4096;
  return (ctx + 1023) / 1024 * 1024;
}

Result<OverheadReport> run_overhead(const Endpoint& engine, const OverheadOptions& o,
                                    const ProgressFn& progress) {
  if (o.reps < 1) return Error("--reps must be at least 1");
  const auto t0 = std::chrono::steady_clock::now();
  OverheadReport report;
  report.options = o;
  HttpClient engine_admin(engine, std::chrono::seconds(120));
  KV_ASSIGN_OR_RETURN(const uint64_t n_ctx, engine_context(engine_admin));
  report.engine = {{"url", engine.url()}, {"context_per_slot", n_ctx}};
  KV_ASSIGN_OR_RETURN(const json bias, word_bias(engine_admin));

  auto inner = std::make_shared<gateway::HttpUpstream>([engine] {
    return gateway::EngineEndpoint{.host = engine.host, .port = engine.port, .api_key = engine.api_key};
  });
  auto tap = std::make_shared<TimingUpstream>(inner);
  static int counter = 0;
  LocalGatewayOptions go{.gateway = o.gateway};
  go.store = std::filesystem::temp_directory_path() /
             fmt::format("kvgate-bench-overhead-{}-{}.db", ::getpid(), counter++);
  KV_ASSIGN_OR_RETURN(auto gw, LocalGateway::start(tap, std::move(go)));
  HttpClient direct(engine);
  HttpClient through(gw->endpoint());

  const size_t total = 2 * static_cast<size_t>(o.warmup + o.reps) +
                       (o.large_bytes > 0 ? static_cast<size_t>(o.warmup + o.large_reps) : 0) +
                       (o.stream_tokens > 0 ? static_cast<size_t>(o.warmup + o.stream_reps) : 0);
  size_t done = 0;
  const json small = {
      {"messages", json::array({{{"role", "system"}, {"content", "You are a helpful assistant."}},
                                {{"role", "user"}, {"content", "Say hello."}}})},
      {"max_tokens", 1},
      {"temperature", 0},
      {"logit_bias", bias}};
  KV_ASSIGN_OR_RETURN(auto small_case,
                      latency_case("small", direct, through, small, o.warmup, o.reps, done, total, progress));
  report.cases.push_back(std::move(small_case));
  json small_streamed = small;
  small_streamed["stream"] = true;
  small_streamed["stream_options"] = {{"include_usage", true}};
  KV_ASSIGN_OR_RETURN(auto streamed_case, latency_case("small, streamed", direct, through, small_streamed,
                                                       o.warmup, o.reps, done, total, progress));
  report.cases.push_back(std::move(streamed_case));
  if (o.large_bytes > 0) {
    json large = small;
    large["messages"] = large_messages(o.large_bytes);
    KV_ASSIGN_OR_RETURN(auto large_case,
                        latency_case(fmt::format("large ({} KiB)", o.large_bytes / 1024), direct, through,
                                     large, o.warmup, o.large_reps, done, total, progress));
    report.cases.push_back(std::move(large_case));
  }
  for (const auto& c : report.cases) {
    if (c.uncached_pairs > 0) {
      report.notes.push_back(
          fmt::format("{} request: in {} of {} pairs a path was not served from the engine's cache", c.name,
                      c.uncached_pairs, c.added_ms.size()));
    }
  }
  if (o.stream_tokens > 0) {
    KV_ASSIGN_OR_RETURN(auto sc, stream_case(direct, through, *tap, bias, o, done, total, progress));
    if (sc.unmatched > 0) {
      report.notes.push_back(fmt::format(
          "{} streamed events through the gateway had no identical upstream event", sc.unmatched));
    }
    report.stream = std::move(sc);
  }
  if (progress) progress(done, total, "done");
  report.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return report;
}

}  // namespace kvgate::bench
