// kvgate serve: the whole gateway — sessions, stabiliser, compaction, overflow retry, rescue,
// durable sessions, metrics, the status page — in front of a llama-server kvgate did not start
// (under systemd, supervisord, Docker, on another box):
//
//   kvgate serve --upstream http://HOST:PORT [--upstream-key KEY] [--listen ADDR] [gateway options]
//
// At start it waits for the server's /health, learns from /props what the gateway needs (the
// context per slot and the slots, mainline or ik_llama.cpp, its build and model;
// upstream/upstream_facts.h; /v1/models' max_model_len where /props is missing, as on vLLM and
// SGLang) and checks /apply-template for exact token counts — without it, counts are estimates
// learned from the server's answers (upstream/token_estimate.h) — and says what it found and
// what it could not; on llama.cpp-family servers it also asks whether the server moves cached
// chunks after a deletion (cli/shift_probe.h), which decides the compaction layout as `up`'s
// plan does. It then watches /health: while the server does not answer,
// requests wait (up to 30 s) and then get 503 with Retry-After; when it answers again after an
// outage its cache is taken as lost (it may have restarted). What only `kvgate up` can do is
// off: the plan and its verification, restarts, saved engine state (the server would need
// --slot-save-path in a folder kvgate owns).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <httplib.h>
#include <unistd.h>

#include "bench/prefill.h"
#include "cli/args.h"
#include "cli/command.h"
#include "cli/gateway_setup.h"
#include "cli/shift_probe.h"
#include "cli/up_options.h"
#include "engine/instance_lock.h"
#include "engine/pinned.h"
#include "fleet/fleet.h"
#include "gateway/gateway.h"
#include "upstream/upstream_facts.h"
#include "http/http_server.h"
#include "util/json.h"
#include "util/net.h"
#include "util/private_files.h"
#include "util/stop_signals.h"

namespace kvgate::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

void say(const std::string& line) { std::fprintf(stderr, "kvgate serve: %s\n", line.c_str()); }

struct UpstreamUrl {
  std::string host;
  uint16_t port = 0;
  std::string text() const { return fmt::format("http://{}:{}", host, port); }
};

// "http://HOST:PORT" (a trailing "/" allowed); plain HTTP only.
Result<UpstreamUrl> parse_upstream_url(const std::string& url) {
  const std::string scheme = "http://";
  if (url.rfind("https://", 0) == 0) {
    return Error(fmt::format(
        "--upstream {}: https is not supported; serve next to the server, or through a tunnel", url));
  }
  if (url.rfind(scheme, 0) != 0) return Error(fmt::format("--upstream '{}': expected http://HOST:PORT", url));
  std::string rest = url.substr(scheme.size());
  if (!rest.empty() && rest.back() == '/') rest.pop_back();
  if (rest.find('/') != std::string::npos) {
    return Error(
        fmt::format("--upstream {}: give the server's address without a path (http://HOST:PORT)", url));
  }
  auto addr = parse_listen(rest);
  if (!addr || rest.find(':') == std::string::npos) {
    return Error(fmt::format("--upstream '{}': expected http://HOST:PORT", url));
  }
  return UpstreamUrl{addr->host, addr->port};
}

httplib::Client client_for(const UpstreamUrl& u, const std::string& key, std::chrono::milliseconds timeout) {
  httplib::Client c(u.host, u.port);
  const auto s = std::chrono::duration_cast<std::chrono::seconds>(timeout);
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(timeout - s);
  c.set_connection_timeout(s.count(), static_cast<time_t>(us.count()));
  c.set_read_timeout(s.count(), static_cast<time_t>(us.count()));
  if (!key.empty()) c.set_bearer_token_auth(key);
  return c;
}

// What the server says of itself, and how it counts prompts: llama.cpp renders them
// (/apply-template), vLLM tokenizes chat messages (/tokenize), others cannot.
struct Learned {
  gateway::UpstreamFacts facts;
  gateway::Counting counting = gateway::Counting::kEstimate;
  std::string model_id;  // /v1/models' first id, named to /tokenize
  ShiftProbe shift;      // llama.cpp family only (it renders prompts)
};

bool answers_with(const httplib::Result& r, std::string_view field) {
  return r && r->status == 200 && r->body.find(fmt::format("\"{}\"", field)) != std::string::npos;
}

gateway::Counting counting_offered(httplib::Client& c, const std::string& model_id) {
  const json messages = json::array({{{"role", "user"}, {"content", "hi"}}});
  if (answers_with(c.Post("/apply-template", util::json_text(json{{"messages", messages}}), "application/json"),
                   "prompt"))
    return gateway::Counting::kRender;
  json chat = {{"messages", messages}, {"add_generation_prompt", true}};
  if (!model_id.empty()) chat["model"] = model_id;
  if (answers_with(c.Post("/tokenize", util::json_text(chat), "application/json"), "count"))
    return gateway::Counting::kChatTokenize;
  return gateway::Counting::kEstimate;
}

Result<Learned> learn_upstream(const UpstreamUrl& u, const std::string& key, std::chrono::seconds wait) {
  auto c = client_for(u, key, std::chrono::seconds(10));
  const auto deadline = std::chrono::steady_clock::now() + wait;
  bool told = false;
  for (;;) {
    auto h = c.Get("/health");
    if (h && h->status == 200) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      return Error(fmt::format("{} did not answer GET /health with 200 within {} s ({})", u.text(),
                               wait.count(),
                               h ? fmt::format("last answer {}", h->status) : httplib::to_string(h.error())));
    }
    if (!told) say(fmt::format("waiting for {} to answer /health ...", u.text()));
    told = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  Learned l;
  auto props = c.Get("/props");
  if (props && props->status == 401)
    return Error(fmt::format("{} refused the key (401): give --upstream-key", u.text()));
  l.facts =
      gateway::read_props(props && props->status == 200 ? json::parse(props->body, nullptr, false) : json());
  if (auto models = c.Get("/v1/models"); models && models->status == 200) {
    const json m = json::parse(models->body, nullptr, false);
    gateway::read_models(m, l.facts);
    gateway::UpstreamFacts ids;
    gateway::read_models(m, ids);
    l.model_id = ids.model;
  }
  l.counting = counting_offered(c, l.model_id);
  if (l.counting == gateway::Counting::kRender) l.shift = probe_shifting(c);
  return l;
}

// Probes the server's /health and keeps its state for the gateway's endpoint provider.
class UpstreamWatch {
 public:
  UpstreamWatch(UpstreamUrl url, std::string key, std::chrono::milliseconds interval,
                std::chrono::milliseconds timeout)
      : url_(std::move(url)), key_(std::move(key)), interval_(interval), timeout_(timeout) {}
  ~UpstreamWatch() { stop(); }

  // `on_back`: called (on the watch's thread) when the server answers again after an outage;
  // `on_probe` (may be empty) with every probe's outcome.
  void start(std::function<void()> on_back, std::function<void(bool ok)> on_probe = {}) {
    thread_ = std::thread(
        [this, on_back = std::move(on_back), on_probe = std::move(on_probe)] { run(on_back, on_probe); });
  }
  void stop() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  void probe_now() { cv_.notify_all(); }
  gateway::EngineEndpoint endpoint() const {
    gateway::EngineEndpoint ep;
    ep.host = url_.host;
    ep.port = url_.port;
    ep.api_key = key_;
    ep.available = up_.load();
    ep.state = ep.available ? "ready" : "unreachable";
    ep.retry_after_s = static_cast<int>(std::max<int64_t>(1, interval_.count() / 1000));
    return ep;
  }
  int outages() const { return outages_.load(); }

 private:
  void run(const std::function<void()>& on_back, const std::function<void(bool)>& on_probe) {
    auto c = client_for(url_, key_, timeout_);
    std::unique_lock lock(mu_);
    while (!stopping_) {
      lock.unlock();
      auto r = c.Get("/health");
      const bool ok = r && r->status == 200;
      if (on_probe) on_probe(ok);
      const bool was = up_.exchange(ok);
      if (was && !ok) {
        ++outages_;
        say(fmt::format("{} is not answering /health ({}): requests wait for it", url_.text(),
                        r                                         ? fmt::format("HTTP {}", r->status)
                        : r.error() == httplib::Error::Connection ? std::string("no connection")
                                                                  : httplib::to_string(r.error())));
      } else if (!was && ok) {
        say(fmt::format("{} answers again: its cache is taken as lost", url_.text()));
        on_back();
      }
      lock.lock();
      cv_.wait_for(lock,
                   ok ? interval_ : std::min<std::chrono::milliseconds>(interval_, std::chrono::seconds(1)),
                   [this] { return stopping_; });
    }
  }

  const UpstreamUrl url_;
  const std::string key_;
  const std::chrono::milliseconds interval_, timeout_;
  std::atomic<bool> up_{true};
  std::atomic<int> outages_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // guarded by mu_
  std::thread thread_;
};

std::string describe(const gateway::UpstreamFacts& f) {
  std::string fork =
      !f.fork ? (f.server.empty() || f.server == "llamacpp" ? std::string("a server of unknown fork")
                                                            : fmt::format("a {} server", f.server))
      : *f.fork == plan::Fork::kIk ? "ik_llama.cpp"
                                   : "mainline llama.cpp";
  if (!f.build.empty()) fork += " " + f.build;
  const std::string slots =
      f.slots ? fmt::format("{} slot{}", *f.slots, *f.slots == 1 ? "" : "s") : "slots unknown";
  const std::string ctx = f.n_ctx_slot ? fmt::format("{} tokens each", *f.n_ctx_slot) : "context unknown";
  return fmt::format("{}, {} of {}{}", fork, slots, ctx, f.model.empty() ? "" : ", model " + f.model);
}

// Several upstreams: the list "URL,URL,...", each once.
Result<std::vector<UpstreamUrl>> parse_upstreams(const std::string& list) {
  std::vector<UpstreamUrl> out;
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t comma = list.find(',', pos);
    if (comma == std::string::npos) comma = list.size();
    KV_ASSIGN_OR_RETURN(UpstreamUrl u, parse_upstream_url(list.substr(pos, comma - pos)));
    for (const auto& seen : out) {
      if (seen.text() == u.text()) return Error(fmt::format("--upstream {} is given twice", u.text()));
    }
    out.push_back(std::move(u));
    pos = comma + 1;
  }
  return out;
}

std::string shift_note(const ShiftProbe& p, std::optional<plan::Fork> fork) {
  if (!p.shifts)
    return fmt::format("cached chunks after a deletion: not known ({}); compaction assumes none", p.why);
  const std::string seen =
      fmt::format("{} of {} tokens computed after a deletion", p.second_computed, p.second_prompt_tokens);
  return *p.shifts ? fmt::format(
                         "cached chunks after a deletion: moved into place ({}); a compaction keeps "
                         "the retained messages before its summary, where they stay cached",
                         seen)
                   : fmt::format(
                         "cached chunks after a deletion: computed again ({}); a compaction puts its "
                         "summary after the system prompt{}",
                         seen,
                         fork == plan::Fork::kMainline
                             ? std::string(" (start mainline with --cache-reuse 256 to keep them cached, on "
                                           "attention-only models)")
                             : "");
}

std::string counting_note(gateway::Counting c) {
  switch (c) {
    case gateway::Counting::kRender:
      return "token counts: exact (the server's /apply-template and /tokenize)";
    case gateway::Counting::kChatTokenize:
      return "token counts: exact (the server's /tokenize of the chat messages, as vLLM offers)";
    case gateway::Counting::kEstimate:
      break;
  }
  return "token counts: the server has no /apply-template and no /tokenize of chat messages; a prompt's "
         "tokens "
         "are estimated from its size at the largest tokens-per-byte rate of the server's last 32 answers "
         "plus "
         "10 % (none before its first answer), and a prompt it refuses as too long is compacted and retried";
}

// One upstream and the whole gateway in front of it.
struct Member {
  UpstreamUrl url;
  Learned learned;
  std::unique_ptr<UpstreamWatch> watch;
  std::unique_ptr<gateway::Gateway> gateway;
  std::string state_note = "sessions in memory only";
};

struct MemberSetup {
  const UpConfig& cfg;
  std::optional<fs::path> state_dir;  // this member's; none: memory only
  bool in_fleet = false;
  std::shared_ptr<gateway::ResponseStore> responses;
  std::function<void(const std::string&)> on_response_stored;
};

Result<std::unique_ptr<Member>> open_member(const UpstreamUrl& url, const MemberSetup& setup) {
  const UpConfig& cfg = setup.cfg;
  auto m = std::make_unique<Member>();
  m->url = url;
  KV_ASSIGN_OR_RETURN(m->learned,
                      learn_upstream(url, cfg.upstream_key.value_or(""), std::chrono::seconds(120)));
  const gateway::UpstreamFacts& facts = m->learned.facts;
  say(fmt::format("upstream: {}: {}", url.text(), describe(facts)));
  if (!facts.unknown.empty()) {
    std::string what;
    for (const auto& u : facts.unknown) what += (what.empty() ? "" : ", ") + u;
    say(fmt::format("its /props does not say: {}{}", what,
                    facts.n_ctx_slot ? ""
                                     : "; without the context, compaction waits for the server to refuse a "
                                       "prompt as too long, then compacts and retries"));
  }
  say(counting_note(m->learned.counting));
  if (m->learned.counting == gateway::Counting::kRender) say(shift_note(m->learned.shift, facts.fork));
  if (cfg.api_keys.size() > 1) {
    // kvgate clears a slot before another key's request uses it, but cannot see the server's
    // host-memory prompt cache, which serves a prompt state to whichever slot asks.
    say("several client keys: start the server with --cache-ram 0, or its host prompt cache lets one key reuse, "
        "and so read, another key's prompts");
  }
  gateway::GatewayOptions go = gateway_options(
      cfg, {.n_ctx_slot = facts.n_ctx_slot.value_or(0),
            .slots = facts.slots.value_or(1),
            .fork = facts.fork.value_or(plan::Fork::kMainline),
            .max_token_bytes = 0,
            .shifts = m->learned.shift.shifts.value_or(false),
            .model_name = facts.model.empty() ? "kvgate" : fs::path(facts.model).filename().string()});
  if (!facts.n_ctx_slot) go.context_tokens.reset();
  go.counting = m->learned.counting;
  go.counting_model = m->learned.model_id;
  // In a fleet a request does not wait long for an engine that is gone: another one serves it.
  if (setup.in_fleet)
    go.wait_for_engine = std::min<std::chrono::milliseconds>(go.wait_for_engine, std::chrono::seconds(2));
  go.responses = setup.responses;
  go.on_response_stored = setup.on_response_stored;
  if (cfg.prefill_report) {
    auto prefill = bench::load_prefill_summary(*cfg.prefill_report);
    if (!prefill) return Error("--prefill-report " + prefill.error().message());
    go.bench_prefill = std::move(*prefill);
  }
  m->watch = std::make_unique<UpstreamWatch>(url, cfg.upstream_key.value_or(""), cfg.timing.health_interval,
                                             cfg.timing.probe_timeout);
  UpstreamWatch* watch = m->watch.get();
  go.on_engine_failure = [watch](const std::string&) { watch->probe_now(); };
  go.engine_report = [watch, &facts = m->learned.facts, text = url.text()] {
    const auto ep = watch->endpoint();
    return json{{"engine",
                 {{"state", ep.state},
                  {"upstream", text},
                  {"fork", facts.fork ? json(plan::fork_name(*facts.fork)) : json(nullptr)},
                  {"build", facts.build.empty() ? json(nullptr) : json(facts.build)},
                  {"model", facts.model},
                  {"outages", watch->outages()}}}};
  };
  go.conversation_field = cfg.conversation_field.value_or("");
  auto upstream =
      std::make_shared<gateway::HttpUpstream>([watch, header = cfg.conversation_header.value_or("")] {
        auto ep = watch->endpoint();
        ep.conversation_header = header;
        return ep;
      });
  m->gateway = std::make_unique<gateway::Gateway>(go, upstream);
  if (m->learned.counting == gateway::Counting::kRender && !m->gateway->template_marks().user_turn_exact) {
    say("its chat template renders an earlier reply differently once a new user message follows (with "
        "thinking "
        "off): each user turn recomputes the previous reply, on a hybrid model the whole prompt; start the "
        "server "
        "with --chat-template-file and the output of `kvgate inspect MODEL.gguf --stable-template`");
  }
  if (setup.state_dir) {
    KV_TRY(util::make_private_dir(*setup.state_dir));
    KV_TRY(m->gateway->open_store(*setup.state_dir / "sessions.db"));
    m->state_note = "sessions kept in " + (*setup.state_dir / "sessions.db").string();
  }
  return m;
}

// The fleet in front of several members (fleet/fleet.h).
std::unique_ptr<gateway::Fleet> make_fleet(const std::vector<std::unique_ptr<Member>>& members,
                                           const UpConfig& cfg, gateway::Routing routing) {
  std::vector<gateway::FleetMember> fm;
  for (const auto& m : members) {
    fm.push_back(fleet_member(m->url.text(), *m->gateway,
                              static_cast<double>(std::clamp(m->learned.facts.slots.value_or(1), 1, 1000)),
                              [w = m->watch.get()] { w->probe_now(); }));
  }
  gateway::FleetOptions fo{.routing = routing};
  // New conversations strictly by load (weighted by slots): an engine above the average
  // would evict one conversation's KV for another while others have free slots.
  fo.router.load_factor = 1.0;
  fo.router.rejoin_after =
      std::max<std::chrono::milliseconds>(std::chrono::seconds(2), 2 * cfg.timing.health_interval);
  return std::make_unique<gateway::Fleet>(std::move(fm), fo);
}

}  // namespace

int run_serve(int argc, char** argv) {
  const util::StopSignals stop_signals = util::StopSignals::install();  // waited for below

  CLI::App app{"Serve the gateway in front of llama-servers kvgate did not start.", "kvgate serve"};
  UpOptions options;
  add_up_options(app, options, OptionSet::kServe);
  if (auto code = parse_args(app, argc, argv)) return *code;
  auto fail = [](const std::string& msg, int code = kExitFailure) {
    say(msg);
    return code;
  };
  if (options.config) {
    if (auto st = merge_config_file(*options.config, options, OptionSet::kServe); !st) {
      return fail(st.error().message(), kExitUsage);
    }
  }
  auto resolved = resolve_up_options(options);
  if (!resolved) return fail(resolved.error().message(), kExitUsage);
  UpConfig cfg = std::move(*resolved);
  if (!cfg.upstream) return fail("give --upstream http://HOST:PORT: the server to serve", kExitUsage);
  auto urls = parse_upstreams(*cfg.upstream);
  if (!urls) return fail(urls.error().message(), kExitUsage);
  const auto routing = gateway::parse_routing(cfg.routing.value_or("affinity"));
  if (!routing)
    return fail(fmt::format("--routing '{}': expected affinity or round-robin", *cfg.routing), kExitUsage);
  if (!util::is_loopback_host(cfg.listen.host) && !cfg.api_key) {
    return fail(
        fmt::format("--listen {} is not a loopback address: give --api-key so clients must authenticate",
                    cfg.listen.host),
        kExitUsage);
  }
  const std::string listen = fmt::format("{}:{}", cfg.listen.host, cfg.listen.port);
  std::vector<std::string> lock_names = {"listen " + listen};
  std::string all;
  for (const auto& u : *urls) {
    lock_names.push_back("upstream " + u.text());
    all += (all.empty() ? "" : ", ") + u.text();
  }
  const std::string who =
      fmt::format("kvgate serve (pid {}) in front of {} on http://{}", ::getpid(), all, listen);
  // One gateway per server: two would give the same slots to different conversations.
  auto lock = engine::InstanceLock::acquire(lock_names, who);
  if (!lock) return fail(lock.error().message());

  const bool in_fleet = urls->size() > 1;
  std::optional<fs::path> state_dir;
  if (cfg.state_dir.value_or("") != "none") {
    state_dir = cfg.state_dir ? fs::path(*cfg.state_dir)
                              : engine::cache_root() / "state" /
                                    fmt::format("serve-{}-{}", cfg.listen.host, cfg.listen.port);
  }
  gateway::Fleet* fleet_ptr = nullptr;  // set once the fleet exists, before any request
  auto responses = in_fleet ? std::make_shared<gateway::ResponseStore>() : nullptr;
  std::vector<std::unique_ptr<Member>> members;
  for (const auto& u : *urls) {
    MemberSetup setup{.cfg = cfg, .in_fleet = in_fleet, .responses = responses};
    if (state_dir)
      setup.state_dir = in_fleet ? *state_dir / fmt::format("upstream-{}-{}", u.host, u.port) : *state_dir;
    if (in_fleet)
      setup.on_response_stored = [&fleet_ptr](const std::string& id) { fleet_ptr->response_stored(id); };
    auto m = open_member(u, setup);
    if (!m) return fail(m.error().message());
    members.push_back(std::move(*m));
  }
  std::unique_ptr<gateway::Fleet> fleet = in_fleet ? make_fleet(members, cfg, *routing) : nullptr;
  fleet_ptr = fleet.get();
  for (size_t i = 0; i < members.size(); ++i) {
    gateway::Gateway* gw = members[i]->gateway.get();
    members[i]->watch->start(
        [gw] { gw->on_engine_restart(); },
        fleet ? std::function<void(bool)>([f = fleet.get(), i](bool ok) { f->report_probe(i, ok); })
              : std::function<void(bool)>());
  }

  http::HttpServerOptions http = front_options(cfg);
  gateway::Gateway& first = *members.front()->gateway;
  http.head_check = [&first](const http::HttpRequest& head) { return first.check_head(head); };
  http::HttpServer front(http,
                         [&first, f = fleet.get()](const http::HttpRequest& r, http::ResponseWriter& w) {
                           if (f) return f->handle(r, w);
                           first.handle(r, w);
                         });
  if (auto st = front.start(); !st) return fail(st.error().message());
  const auto& go = first.options();
  say(fmt::format(
      "gateway: http://{}:{}/v1  ({}{}; compaction {}{}; saved engine state off: the server is not kvgate's)",
      cfg.listen.host, front.port(),
      in_fleet && state_dir ? "sessions kept under " + state_dir->string() : members.front()->state_note,
      in_fleet ? fmt::format("; {} engines, routing {}", members.size(), cfg.routing.value_or("affinity"))
               : std::string(),
      go.compaction ? "on" : "off",
      go.high_watermark_tokens && *go.high_watermark_tokens > 0
          ? fmt::format(" at {} tokens", *go.high_watermark_tokens)
          : std::string()));
  std::fflush(stderr);
  for (;;) {
    if (const auto why = stop_signals.wait(std::chrono::seconds(1))) {
      say(fmt::format("{} received: stopping", *why));
      break;
    }
  }
  front.stop();
  for (auto& m : members) m->watch->stop();
  return kExitOk;
}

}  // namespace kvgate::cli
