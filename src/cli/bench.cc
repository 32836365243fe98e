// kvgate bench prefill|replay|clients|overhead: measurements of the engine and of kvgate in
// front of it, written as CSV, JSON and SVG into --out DIR (see src/bench and docs/BENCHMARKS.md).
//
//   kvgate bench prefill  (--url URL [--api-key K] | --model FILE) [--ctx 4k..64k] [--reps 3]
//   kvgate bench replay   TRACE.jsonl --model FILE [--ctx 32k] [--turns N] [--live] [--restart-every N]
//   kvgate bench clients  --model FILE [--ctx 16k] [--behaviours all] [--seeds 1,2,3] [--turns 30] [--check]
//   kvgate bench overhead (--url URL [--api-key K] | --model FILE) [--reps 100] [--large-bytes 1MiB]
//
// With --model the pinned engine (or --server BIN, or $KVGATE_SERVER) is started on a free
// loopback port with one slot and stopped at the end; --engine-args adds flags verbatim.
// Progress goes to stderr when it is a terminal; the summary to stdout (--json: the report).
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "bench/clients.h"
#include "bench/local_engine.h"
#include "bench/overhead.h"
#include "bench/prefill.h"
#include "bench/progress.h"
#include "bench/replay.h"
#include "cli/args.h"
#include "cli/command.h"
#include "engine/pinned.h"
#include "engine/probe.h"
#include "gguf/file.h"
#include "plan/engine_choices.h"
#include "plan/engine_quirks.h"
#include "plan/fit.h"
#include "plan/model_desc.h"
#include "util/json.h"
#include "util/log.h"
#include "util/units.h"

namespace kvgate::cli {
namespace {

namespace fs = std::filesystem;

struct TargetArgs {
  std::string url;
  std::string api_key;
  std::string model;
  std::string server;
  std::string engine_args;
};

void add_target(CLI::App& cmd, TargetArgs& t, bool url_allowed) {
  if (url_allowed) {
    cmd.add_option("--url", t.url, "a running llama-server, http://HOST:PORT");
    cmd.add_option("--api-key", t.api_key, "its API key");
  }
  cmd.add_option("--model", t.model, "a GGUF model: start the engine on it (one slot, --metrics)");
  cmd.add_option("--server", t.server,
                 "llama-server binary for --model (default: $KVGATE_SERVER, the pinned build)");
  cmd.add_option("--engine-args", t.engine_args, "extra engine flags for --model, e.g. \"-t 2 -fa on\"");
}

// The engine to measure: the one at --url, or one started here on --model.
struct Target {
  bench::Endpoint endpoint;
  std::unique_ptr<bench::LocalEngine> owned;
};

Result<Target> open_target(const TargetArgs& t, uint64_t context, const bench::OutputDir& out) {
  if (t.url.empty() == t.model.empty())
    return Error("give either --url URL (a running engine) or --model FILE");
  Target target;
  if (!t.url.empty()) {
    KV_ASSIGN_OR_RETURN(target.endpoint, bench::parse_endpoint_url(t.url, t.api_key));
    return target;
  }
  bench::LocalEngineOptions o{.model = t.model,
                              .context = context,
                              .slots = 1,
                              .extra_args = bench::split_args(t.engine_args),
                              .log_file = out.path("engine.log")};
  if (!t.server.empty()) o.server = t.server;
  KV_ASSIGN_OR_RETURN(target.owned, bench::LocalEngine::start(o));
  target.endpoint = target.owned->endpoint();
  return target;
}

int fail(std::string_view sub, const std::string& message) {
  std::fprintf(stderr, "kvgate bench %.*s: %s\n", static_cast<int>(sub.size()), sub.data(), message.c_str());
  return kExitFailure;
}

void list_written(const bench::OutputDir& out) {
  std::string line = "wrote:";
  for (const auto& p : out.written()) line += " " + p.string();
  std::printf("%s\n", line.c_str());
}

int prefill(const TargetArgs& t, const std::string& ctx, int reps, double cliff_fraction, double cap_fraction,
            uint64_t cache_check, uint64_t seed, const std::string& out_dir, bool json) {
  auto sizes = bench::parse_context_sizes(ctx);
  if (!sizes) return fail("prefill", sizes.error().message());
  if (!(cliff_fraction > 0 && cliff_fraction < 1))
    return fail("prefill", "--cliff-fraction must be between 0 and 1");
  if (!(cap_fraction > 0 && cap_fraction <= 1)) return fail("prefill", "--cap-fraction must be in (0, 1]");
  auto out = bench::OutputDir::open(out_dir);
  if (!out) return fail("prefill", out.error().message());
  auto target = open_target(t, (sizes->back() + 256 + 255) / 256 * 256, *out);
  if (!target) return fail("prefill", target.error().message());
  bench::PrefillOptions o{.sizes = *sizes, .reps = reps, .cache_check_tokens = cache_check, .seed = seed};
  o.cliff.fraction = cliff_fraction;
  o.cliff.cap_fraction = cap_fraction;
  bench::HttpClient client(target->endpoint);
  bench::TerminalProgress progress;
  auto report = bench::run_prefill(client, o, progress.callback());
  progress.clear();
  if (!report) return fail("prefill", report.error().message());
  if (target->owned) report->engine["command"] = target->owned->command_line();
  if (auto st = bench::write_prefill(*report, *out); !st) return fail("prefill", st.error().message());
  if (json) {
    std::printf("%s\n", util::json_text(bench::to_json(*report), 2).c_str());
  } else {
    std::fputs(bench::prefill_text(*report).c_str(), stdout);
    list_written(*out);
  }
  return kExitOk;
}

struct ReplayArgs {
  std::string trace_path;
  TargetArgs target;
  std::string ctx = "32k";
  std::string paths = "both";
  size_t turns = 0;
  bool live = false, plain_words = false, as_recorded = false;
  std::optional<int> max_tokens;
  uint32_t cache_reuse = plan::kCacheReuseChunk;
  std::string high_watermark;
  size_t restart_every = 0;
};

// With restarts, the gateway keeps conversations' engine states as `kvgate up` does (its
// kv_options(), plan::choose_saved_state with half the free space of the temporary folder),
// the identity constant over the run, exact prefixes for models with recurrent state. Off
// otherwise, with the reason.
void choose_saved_states(const ReplayArgs& a, const plan::ServerCaps& caps, bool recurrent,
                         bench::ReplayOptions& o) {
  if (a.restart_every == 0) return;
  std::error_code ec;
  const fs::path tmp = fs::temp_directory_path(ec);
  const auto space = fs::space(tmp, ec);
  const plan::SavedStateChoice choice = plan::choose_saved_state(
      caps, {.free_bytes = ec ? 0 : space.available, .free_share = 2, .where = tmp.string()});
  if (!choice.enabled()) {
    o.saved_states_off = choice.off_because;
    return;
  }
  o.gateway.kv.disk_budget_bytes = choice.disk_budget_bytes;
  o.gateway.kv.exact_prefix = recurrent;
  o.gateway.kv.identity = {{"model", fs::absolute(o.engine.model, ec).string()},
                           {"model_bytes", fs::file_size(o.engine.model, ec)},
                           {"engine", caps.describe()},
                           {"context", o.engine.context},
                           {"slots", o.engine.slots},
                           {"engine_args", o.engine.extra_args}};
}

// The engine's flags (as `kvgate up` runs the build) and what the gateway must know of them.
struct EngineChoice {
  bench::LocalEngineOptions engine;
  plan::ServerCaps caps;
  bool recurrent = false;  // known when `describe` (ik builds always describe the model)
  bool summary_after_tail = false;
};

Result<EngineChoice> choose_engine(const TargetArgs& t, uint64_t context, uint32_t cache_reuse, bool describe) {
  EngineChoice c;
  c.engine = {.model = t.model, .context = context, .slots = 1, .extra_args = bench::split_args(t.engine_args)};
  if (!t.server.empty()) c.engine.server = t.server;
  // The build decides the fork: ik runs as `kvgate up` runs it (jinja on, context shift off,
  // no ./llama.log, the checkpoint tolerance for hybrid models; it has no chunk reuse).
  KV_ASSIGN_OR_RETURN(
      auto server_bin,
      engine::resolve_server(t.server.empty() ? std::nullopt : std::optional<std::string>(t.server)));
  KV_ASSIGN_OR_RETURN(auto probed, engine::probe_server(server_bin));
  c.caps = probed.caps;
  const bool ik = probed.caps.fork == plan::Fork::kIk;
  if (ik || describe) {
    KV_ASSIGN_OR_RETURN(auto file, gguf::File::open(t.model));
    KV_ASSIGN_OR_RETURN(auto desc, plan::describe_model(file));
    c.recurrent = desc.has_recurrent();
  }
  if (ik) {
    cache_reuse = 0;
    c.engine.extra_args.insert(c.engine.extra_args.end(), {"--jinja", "--context-shift", "off", "--log-disable"});
    plan::ServerSettings s;
    plan::choose_fork_settings(probed.caps, c.recurrent, s);
    if (s.ctx_checkpoint_tolerance) {
      c.engine.extra_args.insert(c.engine.extra_args.end(), {"-ctx-ckpt-t", std::to_string(*s.ctx_checkpoint_tolerance)});
    }
  }
  // The engine runs as `kvgate up` runs it for an attention-only model: chunk reuse on (the
  // direct path gets it too, so the settings are the same), and the gateway compacts at the
  // planner's safe cap with the summary after the retained messages, which then stay cached.
  if (cache_reuse > 0) {
    c.engine.extra_args.insert(c.engine.extra_args.end(), {"--cache-reuse", std::to_string(cache_reuse)});
  }
  c.summary_after_tail = cache_reuse > 0;
  return c;
}

// The engine's flags for both paths and the gateway's settings that depend on them.
Status choose_engine_settings(const ReplayArgs& a, uint64_t context, bench::ReplayOptions& o) {
  KV_ASSIGN_OR_RETURN(EngineChoice c, choose_engine(a.target, context, a.cache_reuse, a.restart_every > 0));
  o.engine = std::move(c.engine);
  o.gateway.engine_fork = c.caps.fork;
  o.gateway.compaction_options.summary_after_tail = c.summary_after_tail;
  o.gateway.engine_shifts = c.summary_after_tail;
  choose_saved_states(a, c.caps, c.recurrent, o);
  return util::ok_status();
}

// The gateway's high watermark: --high-watermark, else the planner's safe cap of the context.
Result<uint64_t> high_watermark(const std::string& option, uint64_t context) {
  if (option.empty()) return uint64_t{plan::safe_cap(static_cast<uint32_t>(context))};
  auto high = util::parse_tokens(option);
  if (!high || *high == 0) return Error("--high-watermark: a token count such as 24k");
  return *high;
}

int replay(const ReplayArgs& a, const std::string& out_dir, bool json) {
  if (a.target.model.empty())
    return fail("replay", "--model FILE is required (each path gets a fresh engine on it)");
  auto context = util::parse_tokens(a.ctx);
  if (!context) return fail("replay", "--ctx: " + context.error().message());
  if (a.paths != "both" && a.paths != "direct" && a.paths != "gateway") {
    return fail("replay", "--paths must be both, direct or gateway");
  }
  auto trace = bench::load_trace(a.trace_path, a.turns);
  if (!trace) return fail("replay", trace.error().message());
  auto out = bench::OutputDir::open(out_dir);
  if (!out) return fail("replay", out.error().message());
  bench::ReplayOptions o;
  o.restart_every = a.restart_every;
  if (auto st = choose_engine_settings(a, *context, o); !st) return fail("replay", st.error().message());
  auto high = high_watermark(a.high_watermark, *context);
  if (!high) return fail("replay", high.error().message());
  o.gateway.high_watermark_tokens = *high;
  o.direct = a.paths != "gateway";
  o.through_gateway = a.paths != "direct";
  o.live = a.live;
  o.max_tokens = a.max_tokens;
  o.plain_words = a.plain_words;
  o.stream = a.as_recorded ? bench::StreamMode::kTrace : bench::StreamMode::kForce;
  o.log_dir = out->dir();
  bench::TerminalProgress progress;
  auto report = bench::run_replay(*trace, o, progress.callback());
  progress.clear();
  if (!report) return fail("replay", report.error().message());
  if (auto st = bench::write_replay(*report, *out); !st) return fail("replay", st.error().message());
  if (json) {
    std::printf("%s\n", util::json_text(bench::to_json(*report), 2).c_str());
  } else {
    std::fputs(bench::replay_text(*report).c_str(), stdout);
    list_written(*out);
  }
  return kExitOk;
}

struct ClientsArgs {
  TargetArgs target;
  std::string ctx = "16k";
  std::string behaviours = "all";
  std::string seeds = "1,2,3";
  std::string paths = "gateway";
  size_t turns = 30;
  uint64_t growth = 0;
  bool plain_words = false, stream = false, check = false;
  uint32_t cache_reuse = 256;
  std::string high_watermark;
};

// The options of kvgate bench clients, the engine and gateway set as for replay.
Result<bench::ClientsOptions> clients_options(const ClientsArgs& a, const fs::path& log_dir) {
  if (a.target.model.empty()) return Error("--model FILE is required (each run gets a fresh engine on it)");
  auto context = util::parse_tokens(a.ctx);
  if (!context) return Error("--ctx: " + context.error().message());
  if (a.paths != "both" && a.paths != "direct" && a.paths != "gateway") {
    return Error("--paths must be both, direct or gateway");
  }
  bench::ClientsOptions o;
  o.context = *context;
  KV_ASSIGN_OR_RETURN(o.seeds, bench::parse_seeds(a.seeds));
  KV_ASSIGN_OR_RETURN(o.behaviours, bench::select_behaviours(bench::client_family(*context, a.turns), a.behaviours));
  for (auto& b : o.behaviours) {
    if (a.growth > 0) b.growth_tokens = a.growth;
    if (a.stream) b.stream = true;
  }
  KV_ASSIGN_OR_RETURN(EngineChoice c, choose_engine(a.target, *context, a.cache_reuse, false));
  o.engine = std::move(c.engine);
  o.gateway.engine_fork = c.caps.fork;
  o.gateway.compaction_options.summary_after_tail = c.summary_after_tail;
  o.gateway.engine_shifts = c.summary_after_tail;
  KV_ASSIGN_OR_RETURN(const uint64_t high, high_watermark(a.high_watermark, *context));
  o.gateway.high_watermark_tokens = high;
  o.turns = a.turns;
  o.plain_words = a.plain_words;
  o.direct = a.paths != "gateway";
  o.through_gateway = a.paths != "direct";
  o.log_dir = log_dir;
  return o;
}

int clients(const ClientsArgs& a, const std::string& out_dir, bool json) {
  auto out = bench::OutputDir::open(out_dir);
  if (!out) return fail("clients", out.error().message());
  auto o = clients_options(a, out->dir());
  if (!o) return fail("clients", o.error().message());
  bench::TerminalProgress progress;
  auto report = bench::run_clients(*o, progress.callback());
  progress.clear();
  if (!report) return fail("clients", report.error().message());
  if (auto st = bench::write_clients(*report, *out); !st) return fail("clients", st.error().message());
  if (json) {
    std::printf("%s\n", util::json_text(bench::to_json(*report), 2).c_str());
  } else {
    std::fputs(bench::clients_text(*report).c_str(), stdout);
    list_written(*out);
  }
  if (a.check) {
    for (const auto& run : report->runs) {
      if (!run.violations.empty()) return kExitFailure;
    }
  }
  return kExitOk;
}

int overhead(const TargetArgs& t, const bench::OverheadOptions& o, const std::string& ctx,
             const std::string& out_dir, bool json) {
  auto out = bench::OutputDir::open(out_dir);
  if (!out) return fail("overhead", out.error().message());
  uint64_t context = bench::overhead_context(o.large_bytes);
  if (!ctx.empty()) {
    auto c = util::parse_tokens(ctx);
    if (!c) return fail("overhead", "--ctx: " + c.error().message());
    context = *c;
  }
  auto target = open_target(t, context, *out);
  if (!target) return fail("overhead", target.error().message());
  bench::TerminalProgress progress;
  auto report = bench::run_overhead(target->endpoint, o, progress.callback());
  progress.clear();
  if (!report) return fail("overhead", report.error().message());
  if (target->owned) report->engine["command"] = target->owned->command_line();
  if (auto st = bench::write_overhead(*report, *out); !st) return fail("overhead", st.error().message());
  if (json) {
    std::printf("%s\n", util::json_text(bench::to_json(*report), 2).c_str());
  } else {
    std::fputs(bench::overhead_text(*report).c_str(), stdout);
    list_written(*out);
  }
  return kExitOk;
}

}  // namespace

int run_bench(int argc, char** argv) {
  CLI::App app{
      "Benchmarks: prefill throughput against context (cliff, safe cap), a trace replayed straight to the "
      "engine and through kvgate, families of simulated clients through kvgate, the gateway's overhead. Files "
      "(CSV, JSON, SVG) go to --out.",
      "kvgate bench"};
  app.require_subcommand(1);
  std::string out_dir = "kvgate-bench";
  bool json = false;
  app.add_option("--out", out_dir, "folder for the files (created if missing; default ./kvgate-bench)");
  app.add_flag("--json", json, "print the JSON report instead of the summary");

  TargetArgs pt;
  std::string p_ctx = "4k..32k";
  int p_reps = 3;
  double cliff_fraction = 0.5, cap_fraction = 0.8;
  uint64_t cache_check = 1024, seed = 1;
  auto* p =
      app.add_subcommand("prefill", "prefill throughput against context size, the cliff and a safe cap");
  add_target(*p, pt, true);
  p->add_option("--ctx", p_ctx,
                "prompt sizes: a list (512,1024,4k) or a range (4k..128k: powers of two and 1.5x)");
  p->add_option("--reps", p_reps, "runs per size (median reported; default 3)");
  p->add_option("--cliff-fraction", cliff_fraction,
                "cliff: throughput below this fraction of the trend (default 0.5)");
  p->add_option("--cap-fraction", cap_fraction,
                "safe cap: this fraction of the last size before the cliff (default 0.8)");
  p->add_option("--cache-check-tokens", cache_check,
                "prompt of the second-turn cache check (0: skip; default 1024)");
  p->add_option("--seed", seed, "random prompts' seed");
  p->add_option("--out", out_dir, "folder for the files");
  p->add_flag("--json", json, "print the JSON report");

  ReplayArgs ra;
  auto* r = app.add_subcommand("replay", "replay an agent trace straight to the engine and through kvgate");
  r->add_option("trace", ra.trace_path,
                "TRACE.jsonl (first line {\"_meta\":…}, then one chat request per turn)")
      ->required();
  add_target(*r, ra.target, false);
  r->add_option("--ctx", ra.ctx, "engine context for both paths (default 32k)");
  r->add_option("--turns", ra.turns, "replay only the first N turns");
  r->add_flag("--live", ra.live,
              "send the model's own replies back instead of the trace's assistant messages");
  r->add_option("--max-tokens", ra.max_tokens, "override the trace's max_tokens");
  r->add_flag("--plain-words", ra.plain_words,
              "bias the output to common English words (random-weight models otherwise emit bytes the "
              "engine's output "
              "parser may reject)");
  r->add_flag("--stream-as-recorded", ra.as_recorded,
              "keep each turn's stream setting (default: stream every turn, so TTFT is measured everywhere)");
  r->add_option("--paths", ra.paths, "both (default), direct or gateway");
  r->add_option("--cache-reuse", ra.cache_reuse,
                "the engine's --cache-reuse on both paths, as kvgate up sets it (default 256; 0: off)");
  r->add_option("--high-watermark", ra.high_watermark,
                "the gateway's high watermark in tokens (default: the planner's safe cap, 3/4 of --ctx)");
  r->add_option("--restart-every", ra.restart_every,
                "kill the engine (SIGKILL) after every N turns and start a fresh one before the next, on "
                "both paths; the gateway then keeps conversations' engine states (--slot-save-path; "
                "mainline only)")
      ->check(CLI::PositiveNumber);
  r->add_option("--out", out_dir, "folder for the files");
  r->add_flag("--json", json, "print the JSON report");

  ClientsArgs ca;
  auto* c = app.add_subcommand(
      "clients", "families of simulated agent clients through kvgate: failures, compactions, prefill, sessions");
  add_target(*c, ca.target, false);
  c->add_option("--ctx", ca.ctx, "engine context per client (default 16k; parallel clients get a slot each)");
  c->add_option("--behaviours", ca.behaviours,
                "comma-separated: append, append-zh, window-messages, window-tokens, window-large, tools, ids, "
                "self-summary, edits, pasted, parallel, user-report; or all (default)");
  c->add_option("--seeds", ca.seeds, "seeds, comma-separated (default 1,2,3)");
  c->add_option("--turns", ca.turns, "turns per client (default 30)")->check(CLI::PositiveNumber);
  c->add_option("--growth", ca.growth, "new tokens per turn for every behaviour (default 500)");
  c->add_option("--paths", ca.paths, "gateway (default), direct or both");
  c->add_flag("--plain-words", ca.plain_words,
              "bias the output to common English words (random-weight models otherwise emit bytes the engine's "
              "output parser may reject)");
  c->add_flag("--stream", ca.stream, "every client streams (default: as the behaviour says: not streamed)");
  c->add_option("--cache-reuse", ca.cache_reuse,
                "the engine's --cache-reuse, as kvgate up sets it (default 256; 0: off)");
  c->add_option("--high-watermark", ca.high_watermark,
                "the gateway's high watermark in tokens (default: the planner's safe cap, 3/4 of --ctx)");
  c->add_flag("--check", ca.check, "exit 1 when a run broke a property");
  c->add_option("--out", out_dir, "folder for the files");
  c->add_flag("--json", json, "print the JSON report");

  TargetArgs ot;
  bench::OverheadOptions oo;
  std::string large = "1MiB", o_ctx;
  auto* o = app.add_subcommand("overhead",
                               "latency the gateway adds: small and large requests, SSE relay per event");
  add_target(*o, ot, true);
  o->add_option("--reps", oo.reps, "small-request pairs (default 100)");
  o->add_option("--large-bytes", large, "size of the large request (default 1MiB; 0: skip)");
  o->add_option("--large-reps", oo.large_reps, "large-request pairs (default 20)");
  o->add_option("--stream-tokens", oo.stream_tokens, "tokens of the streamed answer (default 64; 0: skip)");
  o->add_option("--stream-reps", oo.stream_reps, "streamed pairs (default 10)");
  o->add_option("--warmup", oo.warmup, "unrecorded pairs first (default 3)");
  o->add_option("--ctx", o_ctx, "engine context for --model (default: enough for the large request)");
  o->add_option("--out", out_dir, "folder for the files");
  o->add_flag("--json", json, "print the JSON report");

  if (auto code = parse_args(app, argc, argv)) return *code;
  if (std::getenv("KVGATE_LOG") == nullptr) util::set_log_level(util::LogLevel::kWarn);

  if (p->parsed())
    return prefill(pt, p_ctx, p_reps, cliff_fraction, cap_fraction, cache_check, seed, out_dir, json);
  if (r->parsed()) {
    return replay(ra, out_dir, json);
  }
  if (c->parsed()) return clients(ca, out_dir, json);
  if (large == "0") {
    oo.large_bytes = 0;
  } else {
    auto bytes = util::parse_bytes(large);
    if (!bytes) return fail("overhead", "--large-bytes: " + bytes.error().message());
    oo.large_bytes = *bytes;
  }
  return overhead(ot, oo, o_ctx, out_dir, json);
}

}  // namespace kvgate::cli
