// kvgate up [MODEL.gguf] [--config FILE] [--listen ADDR] [planner and engine options]
//
// plan → launch → verify → serve, then supervise until SIGINT/SIGTERM:
//   1. take the instance locks (listen address, model) and the listen port;
//   2. probe the llama-server build (cached) and map the settings to its flags;
//   3. plan the memory from the GGUF (refusing a plan over --memory);
//   4. start the engine under the supervisor (engine/supervisor.h): /health, the startup
//      log checked as it arrives, a real 1-token completion, then deep health probes,
//      restarts on crash or hang;
//   5. serve the gateway (src/gateway: sessions, compaction, durable state) on --listen and
//      print what is running.
// Exit: 0 after a requested stop, 1 when the engine cannot be started or kvgate gives up
// (a service manager then restarts it), 2 for usage errors.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include "bench/prefill.h"
#include "cli/args.h"
#include "cli/command.h"
#include "cli/gateway_setup.h"
#include "cli/up_options.h"
#include "cli/up_steps.h"
#include "device/facts.h"
#include "engine/instance_lock.h"
#include "engine/live_doctor.h"
#include "engine/pinned.h"
#include "engine/probe.h"
#include "engine/rotating_log.h"
#include "engine/start_plan.h"
#include "engine/status_report.h"
#include "engine/supervisor.h"
#include "gateway/gateway.h"
#include "gguf/file.h"
#include "gguf/synth.h"
#include "http/http_server.h"
#include "plan/chat_template.h"
#include "plan/engine_choices.h"
#include "plan/launch_args.h"
#include "plan/memory_model.h"
#include "plan/model_desc.h"
#include "util/calendar.h"
#include "util/net.h"
#include "util/private_files.h"
#include "util/units.h"

namespace kvgate::cli {
namespace up {

int64_t steady_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void say(const std::string& line) { std::fprintf(stderr, "kvgate up: %s\n", line.c_str()); }

std::string clock_time() {
  const std::time_t t = std::time(nullptr);
  const std::tm tm = util::local_calendar(t);
  char buf[16];
  std::strftime(buf, sizeof buf, "%H:%M:%S", &tm);
  return buf;
}

std::string random_key() {
  std::random_device rd;
  std::string key;
  for (int i = 0; i < 4; ++i) key += fmt::format("{:08x}", rd());
  return key;
}

// The model to serve: the given file, or the built-in default model (written when missing).
Result<fs::path> resolve_model(const std::optional<std::string>& given) {
  std::error_code ec;
  if (given) {
    if (!fs::is_regular_file(*given, ec)) return Error(fmt::format("model '{}' is not a file", *given));
    return fs::canonical(*given);
  }
  const fs::path path = engine::default_model_path();
  if (fs::is_regular_file(path, ec)) return path;
  say(fmt::format("writing the built-in default model to {}", path.string()));
  const auto* preset = gguf::find_synth_preset("default");
  if (preset == nullptr) return Error("the built-in default model preset is missing");
  KV_ASSIGN_OR_RETURN(auto vocab_path, engine::vocab_file("qwen2"));
  KV_ASSIGN_OR_RETURN(auto vocab, gguf::File::open(vocab_path));
  fs::create_directories(path.parent_path(), ec);
  const fs::path tmp = path.string() + fmt::format(".tmp{}", ::getpid());
  auto written = gguf::synthesize(preset->spec, &vocab, tmp);
  if (!written) return std::move(written).error().with_context("writing the default model");
  fs::rename(tmp, path, ec);
  if (ec) return Error(fmt::format("cannot move the default model into place: {}", ec.message()));
  return path;
}

// Bytes of the model's longest vocabulary entry: no token the engine produces covers more
// bytes of text (byte-level BPE stores each byte as one or two UTF-8 bytes, SentencePiece a
// space as three), so a text of B bytes is at least B / this many tokens. 0 when unknown.
uint64_t longest_token_bytes(const gguf::File& f) {
  const gguf::Value* tokens = f.find("tokenizer.ggml.tokens");
  if (tokens == nullptr || !tokens->is_array()) return 0;
  uint64_t longest = 0;
  for (const gguf::Value v : *tokens) {
    if (auto s = v.as_string()) longest = std::max<uint64_t>(longest, s->size());
  }
  return longest;
}

// The engine's key goes in a 0600 file passed with --api-key-file where the build has it:
// its command line (/proc/PID/cmdline) is readable by every local user.
Status write_engine_key(const plan::ServerCaps& caps, const fs::path& key_file,
                        plan::ServerSettings& settings) {
  if (!caps.accepts("--api-key-file /dev/null")) {
    say("warning: this llama-server build has no --api-key-file: its key is on its command line");
    return {};
  }
  KV_TRY(util::write_private_file(key_file, *settings.api_key + "\n"));
  settings.api_key_file = key_file.string();
  return {};
}

std::string mib(uint64_t bytes) { return util::format_mib(bytes) + " MiB"; }

std::string plan_summary(const plan::MemoryPlan& p, const std::optional<uint64_t>& budget) {
  std::string kv;
  for (const auto& c : p.caches) {
    const std::string role =
        c.role == plan::CacheRole::kMain ? "" : std::string(plan::cache_role_name(c.role)) + " ";
    kv += fmt::format("{}{}{}/{} {} cells × {} layers {}", kv.empty() ? "" : ", ", role, c.type_k,
                      c.type_v.empty() ? "-" : c.type_v, c.cells, c.layers, mib(c.bytes()));
  }
  std::string out = fmt::format("ctx {} ({} slot{} × {}), KV {}", p.n_ctx, p.n_seq_max,
                                p.n_seq_max == 1 ? "" : "s", p.n_ctx_slot, kv.empty() ? "none" : kv);
  if (p.recurrent) out += fmt::format(", recurrent state {}", mib(p.recurrent_bytes()));
  out += fmt::format("; weights {} device + {} host; compute ≈ {}; total {} incl. {} reserve",
                     mib(p.weights_device), mib(p.weights_host), mib(p.compute_device + p.compute_host),
                     util::format_bytes(p.total()), util::format_bytes(p.reserve));
  if (budget) out += fmt::format(" (budget {})", util::format_bytes(*budget));
  if (p.estimate) out += " [estimate]";
  return out;
}

// Saving conversations' engine state (kvstate/kv_keeper.h): on unless --kv-disk 0, the
// sessions are in memory only, or the planner says no (plan::choose_saved_state). The
// identity holds what a saved state depends on: a file saved under anything else is never
// restored.
gateway::KvOptions kv_options(const UpConfig& cfg, const plan::ServerCaps& caps, const fs::path& instance_dir,
                              const engine::StartPlan& start) {
  gateway::KvOptions kv;
  if (cfg.state_dir.value_or("") == "none") return kv;
  std::error_code ec;
  const auto space = fs::space(instance_dir, ec);
  const plan::SavedStateChoice choice = plan::choose_saved_state(
      caps,
      {.disk_bytes = cfg.kv_disk, .free_bytes = ec ? 0 : space.available, .where = instance_dir.string()});
  if (!choice.enabled()) {
    if (!choice.off_because.empty()) say("conversations' engine state is not saved: " + choice.off_because);
    return kv;
  }
  const plan::ServerSettings& settings = start.settings;
  kv.dir = kv_dir_of(instance_dir);
  kv.disk_budget_bytes = choice.disk_budget_bytes;
  kv.save_every_tokens = cfg.kv_save_every.value_or(0);
  kv.exact_prefix = start.memory.recurrent.has_value();
  const auto model_size = fs::file_size(settings.model_path, ec);
  const auto model_time = fs::last_write_time(settings.model_path, ec).time_since_epoch().count();
  kv.identity = {{"model", settings.model_path},
                 {"model_bytes", model_size},
                 {"model_mtime", model_time},
                 {"engine", caps.describe()},
                 {"cache_type_k", settings.cache_type_k},
                 {"cache_type_v", settings.cache_type_v},
                 {"flash_attn", static_cast<int>(settings.flash_attn)},
                 {"swa_full", settings.swa_full},
                 {"ctx_per_slot", start.memory.n_ctx_slot}};
  return kv;
}

// The options checked: the config file merged in, every value resolved, and a client key
// required off loopback. Errors are usage errors.
Result<UpConfig> checked_config(UpOptions& options) {
  if (options.config) KV_TRY(merge_config_file(*options.config, options));
  KV_ASSIGN_OR_RETURN(UpConfig cfg, resolve_up_options(options));
  // Engines side by side share the CPU unless told otherwise.
  if (cfg.engines > 1 && !cfg.settings.threads) {
    cfg.settings.threads = std::max(1u, std::thread::hardware_concurrency() / cfg.engines);
  }
  if (!util::is_loopback_host(cfg.listen.host) && !cfg.api_key) {
    return Error(
        fmt::format("--listen {} is not a loopback address: give --api-key so clients must authenticate",
                    cfg.listen.host));
  }
  return cfg;
}

// 1. Model, locks. 2. The build, the instance directory and the engine's key.
Status take_model_and_build(const UpConfig& cfg, Prepared& p) {
  KV_ASSIGN_OR_RETURN(p.model, resolve_model(cfg.model));
  p.listen = fmt::format("{}:{}", cfg.listen.host, cfg.listen.port);
  p.who = fmt::format("kvgate up (pid {}) serving {} on http://{}", ::getpid(), p.model.string(), p.listen);
  KV_ASSIGN_OR_RETURN(
      auto lock, engine::InstanceLock::acquire({"listen " + p.listen, "model " + p.model.string()}, p.who));
  p.lock = std::move(lock);
  KV_ASSIGN_OR_RETURN(p.server, engine::resolve_server(cfg.server));
  KV_ASSIGN_OR_RETURN(auto probed, engine::probe_server(p.server));
  p.caps = probed.caps;
  p.instance_dir =
      cfg.state_dir && *cfg.state_dir != "none"
          ? fs::path(*cfg.state_dir)
          : engine::cache_root() / "state" / fmt::format("up-{}-{}", cfg.listen.host, cfg.listen.port);
  KV_TRY(util::make_private_dir(p.instance_dir));
  p.key_file = p.instance_dir / "engine.key";
  return {};
}

// The model's template made prefix-stable (plan/chat_template.h), written beside the engine's
// key and passed with --chat-template-file; `template_note` says what was done.
Status use_stable_template(const UpConfig& cfg, const gguf::File& f, Prepared& p) {
  if (!cfg.stable_template || !p.start.settings.jinja) {
    p.template_note = "the model's template as it is (--stable-template off)";
    return {};
  }
  const auto tmpl = f.get_string("tokenizer.chat_template");
  if (!tmpl) {
    p.template_note = "the engine's own (the model has none)";
    return {};
  }
  const plan::StableTemplate stable = plan::prefix_stable_template(*tmpl);
  p.template_note = stable.describe();
  if (!stable.patched()) return {};
  if (!p.caps.help_flags.count("--chat-template-file")) {
    p.template_note = "the model's template as it is (this build lists no --chat-template-file)";
    return {};
  }
  const fs::path file = p.instance_dir / "chat-template.jinja";
  KV_TRY(util::write_private_file(file, stable.text));
  p.start.settings.chat_template_file = file.string();
  return {};
}

// 3. The plan, refused over its budget; the saved state and the build's arguments.
Status plan_engine(const UpConfig& cfg, const UpOptions& options, const device::Facts& dev, Prepared& p) {
  engine::StartRequest request{.settings = cfg.settings,
                               .n_gpu_layers = cfg.n_gpu_layers,
                               .reserve_bytes = cfg.reserve,
                               .memory_budget = cfg.memory_budget};
  request.settings.model_path = p.model.string();
  request.settings.api_key = random_key();
  KV_TRY(write_engine_key(p.caps, p.key_file, request.settings));
  KV_ASSIGN_OR_RETURN(auto gguf_file, gguf::File::open(p.model));
  KV_ASSIGN_OR_RETURN(auto desc, plan::describe_model(gguf_file));
  p.max_token_bytes = longest_token_bytes(gguf_file);
  auto start = engine::plan_start(desc, p.caps, dev, request);
  if (!start) return std::move(start).error().with_context("planning");
  p.start = std::move(*start);
  if (p.start.over_budget()) {
    const uint64_t budget = *p.start.budget.bytes;
    const std::string given = cfg.memory_budget ? options.values.at("memory") : util::format_bytes(budget);
    const char* what = cfg.memory_budget ? "--memory" : "the memory available (MemAvailable, unified memory)";
    return Error(fmt::format("the plan needs {}, more than {} {}: {}. Try kvgate plan {} --fit --memory {}",
                             util::format_bytes(p.start.memory.total()), what, util::format_bytes(budget),
                             plan_summary(p.start.memory, p.start.budget.bytes), p.model.string(), given));
  }
  p.kv = kv_options(cfg, p.caps, p.instance_dir, p.start);
  if (p.kv.enabled()) p.start.settings.slot_save_path = p.kv.dir.string();
  KV_TRY(use_stable_template(cfg, gguf_file, p));
  KV_ASSIGN_OR_RETURN(p.args, plan::launch_args(p.start.settings, p.caps));
  return {};
}

std::map<std::string, std::string> engine_env(const UpConfig& cfg, size_t i) {
  if (i >= cfg.engine_devices.size()) return {};
  return {{"CUDA_VISIBLE_DEVICES", cfg.engine_devices[i]}};
}

engine::SupervisorConfig supervisor_config(const UpConfig& cfg, const Prepared& p,
                                           std::shared_ptr<engine::RotatingLog> log) {
  engine::SupervisorConfig sc;
  sc.launch = {.binary = p.server, .args = p.args, .api_key = *p.start.settings.api_key, .env = p.engine_env};
  sc.restart = cfg.restart;
  sc.timing = cfg.timing;
  sc.on_mismatch = cfg.on_mismatch;
  sc.verifier = engine::doctor_verifier_factory(p.start.memory, p.start.settings);
  sc.log = std::move(log);
  sc.on_event = [](std::string_view line) {
    std::fprintf(stderr, "[%s] %.*s\n", clock_time().c_str(), static_cast<int>(line.size()), line.data());
  };
  return sc;
}

std::shared_ptr<gateway::HttpUpstream> supervised_upstream(engine::Supervisor& supervisor) {
  return std::make_shared<gateway::HttpUpstream>([&supervisor]() {
    const auto st = supervisor.status();
    gateway::EngineEndpoint ep;
    ep.available = engine::is_serving(st.state) && st.endpoint.has_value();
    ep.coming_back = !ep.available && !engine::is_terminal(st.state);
    ep.state = engine::state_name(st.state);
    if (st.endpoint) {
      ep.host = st.endpoint->host;
      ep.port = st.endpoint->port;
      ep.api_key = st.endpoint->api_key;
    }
    return ep;
  });
}

// 4. The gateway's options: what up knows of the engine, the supervisor's callbacks and the
// status page's engine and memory panels (uptime counts from the engine's readiness,
// `ready_since` in steady ms, 0 while not serving).
Result<gateway::GatewayOptions> up_gateway_options(const UpConfig& cfg, const Prepared& p,
                                                   engine::Supervisor& supervisor,
                                                   std::shared_ptr<std::atomic<int64_t>> ready_since) {
  const plan::ServerSettings& settings = p.start.settings;
  gateway::GatewayOptions go =
      gateway_options(cfg, {.n_ctx_slot = p.start.memory.n_ctx_slot,
                            .slots = static_cast<int>(std::max<uint32_t>(1, settings.parallel)),
                            .fork = p.caps.fork,
                            .max_token_bytes = p.max_token_bytes,
                            .shifts = p.start.shifts,
                            .model_name = settings.alias.value_or(p.model.filename().string())});
  go.wait_for_restart = cfg.timing.start_timeout + cfg.timing.ready_timeout;
  go.on_engine_failure = [&supervisor](const std::string& what) { supervisor.report_upstream_failure(what); };
  go.on_requests_failing = [&supervisor](const std::string& what) {
    supervisor.report_requests_failing(what);
  };
  go.kv = p.kv;
  if (cfg.prefill_report) {
    auto prefill = bench::load_prefill_summary(*cfg.prefill_report);
    if (!prefill) return Error("--prefill-report " + prefill.error().message());
    go.bench_prefill = std::move(*prefill);
  }
  go.engine_report = [&supervisor, ready_since, caps = p.caps, plan = p.start.memory,
                      budget = p.start.budget] {
    const auto st = supervisor.status();
    const int64_t since = ready_since->load();
    std::optional<double> uptime;
    if (since > 0 && engine::is_serving(st.state)) uptime = static_cast<double>(steady_ms() - since) / 1000.0;
    const engine::ReportedMemory* reported = st.verification ? &st.verification->reported : nullptr;
    return nlohmann::json{
        {"engine", engine::engine_status_json(st, caps.fork, caps.describe(), uptime)},
        {"memory", engine::memory_status_json(plan, budget.bytes, budget.source, reported)}};
  };
  return go;
}

Result<std::string> open_state(gateway::Gateway& gw, const UpConfig& cfg, const Prepared& p) {
  std::string note = "sessions in memory only";
  if (cfg.state_dir.value_or("") != "none") {
    KV_TRY(gw.open_store(p.instance_dir / "sessions.db"));
    note = "sessions kept in " + (p.instance_dir / "sessions.db").string();
  }
  if (p.kv.enabled()) {
    KV_TRY(gw.open_kv_states());
    note += fmt::format("; conversations' engine state saved in {} (up to {})", p.kv.dir.string(),
                        util::format_bytes(p.kv.disk_budget_bytes));
  } else {
    note += "; engine state not saved";
  }
  return note;
}

void follow_engine(engine::Supervisor& supervisor, gateway::Gateway& gw,
                   std::shared_ptr<std::atomic<int64_t>> ready_since) {
  auto seen_generation = std::make_shared<uint64_t>(0);  // only the supervisor's thread uses it
  auto hung = std::make_shared<bool>(false);             // the last engine lost was a zombie
  supervisor.add_listener([&gw, seen_generation, hung, ready_since](const engine::Transition& t,
                                                                    const engine::SupervisorStatus& st) {
    if (t.to == engine::State::kRestarting) *hung = t.event == engine::Event::kProbeFailed;
    if (st.generation != *seen_generation) {
      if (*seen_generation != 0) gw.on_engine_restart(*hung);
      *seen_generation = st.generation;
      *hung = false;
    }
    if (!engine::is_serving(st.state)) {
      ready_since->store(0);
    } else if (ready_since->load() == 0) {
      ready_since->store(steady_ms());
    }
  });
}

void announce_ready(const engine::SupervisorStatus& st, const std::string& gateway_line) {
  say(fmt::format("ready in {:.1f} s: engine pid {} on {}",
                  static_cast<double>(st.last_start.count()) / 1000.0, st.pid,
                  st.endpoint ? st.endpoint->base_url() : "?"));
  if (st.verification && !st.verification->checker.empty()) {
    say(fmt::format("startup log checked ({}):", st.verification->checker));
    for (const auto& v : st.verification->verified) say("  ok: " + v);
    for (const auto& w : st.verification->warnings) say("  warning: " + w);
    for (const auto& f : st.verification->findings) say("  MISMATCH (--on-mismatch warn): " + f);
  } else {
    say("startup log: not checked (no verifier available)");
  }
  say(gateway_line);
  std::fflush(stderr);
}

// 5. Serves until a signal (exit 0) or until the supervisor gives up (exit 1).
int serve_until_stopped(const util::StopSignals& stop_signals, engine::Supervisor& supervisor,
                        const fs::path& log_file, const std::string& gateway_line) {
  bool announced = false;
  for (;;) {
    if (const auto why = stop_signals.wait(std::chrono::milliseconds(200))) {
      say(fmt::format("{} received: stopping", *why));
      return kExitOk;
    }
    const auto st = supervisor.status();
    if (st.state == engine::State::kFailed) {
      say("giving up: " + st.cause);
      say(fmt::format("the engine's whole output: {}", log_file.string()));
      return kExitFailure;
    }
    if (!announced && engine::is_serving(st.state)) {
      announced = true;
      announce_ready(st, gateway_line);
    }
  }
}

// The device: what it is, and what is wrong with it for serving (warnings do not stop it).
device::Facts read_device() {
  device::Facts dev = device::read_local_facts();
  say("device: " + dev.summary());
  for (const auto& c : dev.checks) {
    if (c.level == device::Level::kWarn) say(fmt::format("warning: {}: {}", c.name, c.detail));
  }
  return dev;
}

fs::path log_dir_of(const UpConfig& cfg) {
  return cfg.log_dir
             ? fs::path(*cfg.log_dir)
             : engine::cache_root() / "logs" / fmt::format("up-{}-{}", cfg.listen.host, cfg.listen.port);
}

}  // namespace up

int run_up(int argc, char** argv) {
  using namespace up;  // NOLINT(google-build-using-namespace): this command's own steps
  // SIGINT/SIGTERM (Windows: Ctrl-C, a stop request) are collected in serve_until_stopped.
  const util::StopSignals stop_signals = util::StopSignals::install();

  CLI::App app{"Plan, launch and verify the engine, then serve it on --listen and keep it healthy.",
               "kvgate up"};
  UpOptions options;
  add_up_options(app, options);
  if (auto code = parse_args(app, argc, argv)) return *code;
  auto fail = [](const std::string& msg, int code = kExitFailure) {
    say(msg);
    return code;
  };
  auto checked = checked_config(options);
  if (!checked) return fail(checked.error().message(), kExitUsage);
  const UpConfig cfg = std::move(*checked);

  const device::Facts dev = read_device();
  Prepared p;
  if (auto st = take_model_and_build(cfg, p); !st) return fail(st.error().message());
  if (auto st = plan_engine(cfg, options, dev, p); !st) return fail(st.error().message());
  say(fmt::format("chat template: {}", p.template_note));
  if (cfg.engines > 1) return serve_engines(cfg, p, stop_signals);
  p.engine_env = engine_env(cfg, 0);
  if (!p.engine_env.empty())
    say(fmt::format("engine: CUDA_VISIBLE_DEVICES={}", p.engine_env["CUDA_VISIBLE_DEVICES"]));

  const fs::path log_dir = log_dir_of(cfg);
  auto log = engine::RotatingLog::open(log_dir / "engine.log", cfg.log_max_bytes, cfg.log_keep);
  if (!log) return fail(log.error().message());
  engine::Supervisor supervisor(
      supervisor_config(cfg, p, std::shared_ptr<engine::RotatingLog>(std::move(*log))));
  supervisor.add_listener(
      [lock = p.lock.get(), who = p.who](const engine::Transition&, const engine::SupervisorStatus& st) {
        if (st.endpoint)
          lock->update(fmt::format("{}, engine pid {} on port {}", who, st.pid, st.endpoint->port));
      });

  // 4. The gateway. It listens before the engine starts: a port held by another process is
  // an error, never a silent move to another port (this process holds the lock, so it is
  // not another kvgate up).
  auto ready_since = std::make_shared<std::atomic<int64_t>>(0);
  auto go = up_gateway_options(cfg, p, supervisor, ready_since);
  if (!go) return fail(go.error().message(), kExitUsage);
  gateway::Gateway gw(*go, supervised_upstream(supervisor));
  auto state_note = open_state(gw, cfg, p);
  if (!state_note) return fail(state_note.error().message());
  follow_engine(supervisor, gw, ready_since);
  http::HttpServerOptions http = front_options(cfg);
  // Route and key are checked from the head, before a body is read (and connections that
  // have not shown a key live in their own, smaller pool).
  http.head_check = [&gw](const http::HttpRequest& head) { return gw.check_head(head); };
  http::HttpServer server_front(
      http, [&gw](const http::HttpRequest& r, http::ResponseWriter& w) { gw.handle(r, w); });
  if (auto st = server_front.start(); !st)
    return fail(st.error().message() + " (no kvgate up holds it: another program does)");
  // A host name that resolved to a non-loopback address needs the key as well.
  if (!server_front.bound_loopback() && !cfg.api_key) {
    return fail(
        fmt::format(
            "--listen {} resolves to a non-loopback address: give --api-key so clients must authenticate",
            cfg.listen.host),
        kExitUsage);
  }
  const std::string gateway_line =
      fmt::format("gateway: http://{}:{}/v1  ({}; compaction {} at {} tokens{})", cfg.listen.host,
                  server_front.port(), *state_note, go->compaction ? "on" : "off",
                  go->high_watermark_tokens.value_or(0), cfg.api_key ? "; clients send --api-key" : "");

  say(fmt::format("engine: {}", p.caps.describe()));
  say(fmt::format("plan: {}", plan_summary(p.start.memory, p.start.budget.bytes)));
  say(fmt::format("engine log: {}", (log_dir / "engine.log").string()));
  supervisor.start();
  const int exit_code = serve_until_stopped(stop_signals, supervisor, log_dir / "engine.log", gateway_line);
  // What the slots hold is saved while the engine still runs, so the next start restores it.
  if (exit_code == kExitOk && engine::is_serving(supervisor.status().state)) gw.save_kv_states();
  // The engine first: streams still relayed end with it, so the gateway's connections can
  // finish and stop() returns promptly.
  supervisor.stop();
  server_front.stop();
  std::error_code ec;
  fs::remove(p.key_file, ec);  // the next start writes a new key
  return exit_code;
}

}  // namespace kvgate::cli
