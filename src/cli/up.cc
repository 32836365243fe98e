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

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include "bench/prefill.h"
#include "cli/args.h"
#include "cli/command.h"
#include "cli/gateway_setup.h"
#include "cli/up_options.h"
#include "device/facts.h"
#include "engine/instance_lock.h"
#include "engine/live_doctor.h"
#include "engine/pinned.h"
#include "engine/probe.h"
#include "engine/rotating_log.h"
#include "engine/status_report.h"
#include "engine/supervisor.h"
#include "gateway/gateway.h"
#include "gguf/file.h"
#include "gguf/synth.h"
#include "http/http_server.h"
#include "plan/engine_quirks.h"
#include "plan/fit.h"
#include "plan/launch_args.h"
#include "plan/memory_model.h"
#include "plan/model_desc.h"
#include "util/net.h"
#include "util/private_files.h"
#include "util/units.h"

namespace kvgate::cli {
namespace {

int64_t steady_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

namespace fs = std::filesystem;

void say(const std::string& line) { std::fprintf(stderr, "kvgate up: %s\n", line.c_str()); }

std::string clock_time() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::localtime_r(&t, &tm);
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
Status write_engine_key(const plan::ServerCaps& caps, const fs::path& key_file, plan::ServerSettings& settings) {
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

// Saving conversations' engine state (gateway/kv_keeper.h): on unless --kv-disk 0, the
// sessions are in memory only, or the build cannot save slots. The identity holds what a
// saved state depends on: a file saved under anything else is never restored.
Result<gateway::KvOptions> kv_options(const UpConfig& cfg, const plan::ServerCaps& caps, const fs::path& instance_dir,
                                      const plan::MemoryPlan& memory, const plan::ServerSettings& settings) {
  gateway::KvOptions kv;
  if (cfg.state_dir.value_or("") == "none" || cfg.kv_disk.value_or(1) == 0) return kv;
  if (!plan::slot_states_reliable(caps.fork)) {
    say("conversations' engine state is not saved: this ik_llama.cpp build loses the answers of slot save/restore "
        "now and then, and then stops answering (plan/engine_quirks.h)");
    return kv;
  }
  if (!caps.help_flags.count("--slot-save-path")) {
    say(fmt::format("conversations' engine state is not saved: {} has no --slot-save-path", caps.describe()));
    return kv;
  }
  kv.dir = instance_dir / "kv";
  if (cfg.kv_disk) {
    kv.disk_budget_bytes = *cfg.kv_disk;
  } else {
    std::error_code ec;
    const auto space = fs::space(instance_dir, ec);
    kv.disk_budget_bytes = ec ? 0 : std::min<uint64_t>(space.available / 10, 64ull << 30);
    if (kv.disk_budget_bytes < (64ull << 20)) {
      say("conversations' engine state is not saved: less than 640 MiB free in " + instance_dir.string());
      kv.disk_budget_bytes = 0;
      return kv;
    }
  }
  kv.save_every_tokens = cfg.kv_save_every.value_or(0);
  kv.exact_prefix = memory.recurrent.has_value();
  std::error_code ec;
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
                 {"ctx_per_slot", memory.n_ctx_slot}};
  return kv;
}

}  // namespace

int run_up(int argc, char** argv) {
  // SIGINT/SIGTERM are collected with sigtimedwait below.
  const sigset_t stop_signals = block_stop_signals();

  CLI::App app{"Plan, launch and verify the engine, then serve it on --listen and keep it healthy.",
               "kvgate up"};
  UpOptions options;
  add_up_options(app, options);
  if (auto code = parse_args(app, argc, argv)) return *code;
  auto fail = [](const std::string& msg, int code = kExitFailure) {
    say(msg);
    return code;
  };
  if (options.config) {
    if (auto st = merge_config_file(*options.config, options); !st)
      return fail(st.error().message(), kExitUsage);
  }
  auto resolved = resolve_up_options(options);
  if (!resolved) return fail(resolved.error().message(), kExitUsage);
  UpConfig cfg = std::move(*resolved);
  if (!util::is_loopback_host(cfg.listen.host) && !cfg.api_key) {
    return fail(
        fmt::format("--listen {} is not a loopback address: give --api-key so clients must authenticate",
                    cfg.listen.host),
        kExitUsage);
  }

  // The device: what it is, and what is wrong with it for serving (warnings do not stop it).
  // On unified memory (Jetson) the budget is MemAvailable unless --memory is given.
  const device::Facts dev = device::read_local_facts();
  say("device: " + dev.summary());
  for (const auto& c : dev.checks) {
    if (c.level == device::Level::kWarn) say(fmt::format("warning: {}: {}", c.name, c.detail));
  }
  std::optional<uint64_t> budget = cfg.memory_budget;
  if (!budget && dev.unified_memory) budget = dev.default_budget();

  // 1. Model, locks, port.
  auto model = resolve_model(cfg.model);
  if (!model) return fail(model.error().message());
  const std::string listen = fmt::format("{}:{}", cfg.listen.host, cfg.listen.port);
  const std::string who =
      fmt::format("kvgate up (pid {}) serving {} on http://{}", ::getpid(), model->string(), listen);
  auto lock = engine::InstanceLock::acquire({"listen " + listen, "model " + model->string()}, who);
  if (!lock) return fail(lock.error().message());

  // 2. The build and its flags.
  auto server = engine::resolve_server(cfg.server);
  if (!server) return fail(server.error().message());
  auto probed = engine::probe_server(*server);
  if (!probed) return fail(probed.error().message());
  const plan::ServerCaps& caps = probed->caps;
  plan::ServerSettings& settings = cfg.settings;
  settings.model_path = model->string();
  settings.n_gpu_layers = cfg.n_gpu_layers.value_or(caps.gpu_offload ? -1 : 0);
  settings.api_key = random_key();
  // The instance's own directory (0700): sessions (unless --state-dir none) and the engine's
  // key file (0600), which keeps the key off the engine's command line.
  const fs::path instance_dir =
      cfg.state_dir && *cfg.state_dir != "none"
          ? fs::path(*cfg.state_dir)
          : engine::cache_root() / "state" / fmt::format("up-{}-{}", cfg.listen.host, cfg.listen.port);
  if (auto st = util::make_private_dir(instance_dir); !st) return fail(st.error().message());
  const fs::path key_file = instance_dir / "engine.key";
  if (auto st = write_engine_key(caps, key_file, settings); !st) return fail(st.error().message());

  // 3. The plan.
  auto gguf_file = gguf::File::open(*model);
  if (!gguf_file) return fail(gguf_file.error().message());
  auto desc = plan::describe_model(*gguf_file);
  if (!desc) return fail(desc.error().message());
  // On unified memory the host prompt cache and checkpoints the options leave unset are sized
  // for the board (plan/unified_defaults.h) and passed to the engine as planned.
  auto memory = plan::plan_memory(*desc, settings,
                                  {.fork = caps.fork,
                                   .reserve_bytes = cfg.reserve,
                                   .has_accelerator = caps.gpu_offload,
                                   .unified_memory = dev.unified_memory,
                                   .memory_budget = dev.unified_memory ? budget.value_or(0) : 0});
  if (!memory) return fail("planning: " + memory.error().message());
  settings = plan::with_sized_defaults(settings, *memory);
  if (budget && memory->total() > *budget) {
    const std::string given = cfg.memory_budget ? options.values["memory"] : util::format_bytes(*budget);
    const char* what = cfg.memory_budget ? "--memory" : "the memory available (MemAvailable, unified memory)";
    return fail(fmt::format("the plan needs {}, more than {} {}: {}. Try kvgate plan {} --fit --memory {}",
                            util::format_bytes(memory->total()), what, util::format_bytes(*budget),
                            plan_summary(*memory, budget), model->string(), given));
  }
  // Chunk reuse by KV shift lets a compacted prompt keep the retained messages' cache
  // (the summary then follows them, see the gateway below). Attention-only models on builds
  // that have it; recurrent and sliding-window caches cannot shift.
  bool shifts = false;
  if (!settings.cache_reuse && caps.accepts("--cache-reuse 0") && !memory->recurrent) {
    bool attention_only = true;
    for (const auto& c : memory->caches) attention_only = attention_only && c.role == plan::CacheRole::kMain;
    if (attention_only) settings.cache_reuse = 256;
  }
  shifts = settings.cache_reuse.value_or(0) > 0 && !memory->recurrent;
  plan::choose_fork_settings(caps, memory->recurrent.has_value(), settings);
  auto kv = kv_options(cfg, caps, instance_dir, *memory, settings);
  if (!kv.ok()) return fail(kv.error().message());
  if (kv->enabled()) settings.slot_save_path = kv->dir.string();
  auto args = plan::launch_args(settings, caps);
  if (!args) return fail(args.error().message());

  const fs::path log_dir =
      cfg.log_dir ? fs::path(*cfg.log_dir)
                  : engine::cache_root() / "logs" / fmt::format("up-{}-{}", cfg.listen.host, cfg.listen.port);
  auto log = engine::RotatingLog::open(log_dir / "engine.log", cfg.log_max_bytes, cfg.log_keep);
  if (!log) return fail(log.error().message());

  engine::SupervisorConfig sc;
  sc.launch = {.binary = *server, .args = *args, .api_key = *settings.api_key};
  sc.restart = cfg.restart;
  sc.timing = cfg.timing;
  sc.on_mismatch = cfg.on_mismatch;
  sc.verifier = engine::doctor_verifier_factory(*memory, settings);
  sc.log = std::shared_ptr<engine::RotatingLog>(std::move(*log));
  sc.on_event = [](std::string_view line) {
    std::fprintf(stderr, "[%s] %.*s\n", clock_time().c_str(), static_cast<int>(line.size()), line.data());
  };
  engine::Supervisor supervisor(std::move(sc));
  engine::InstanceLock* lock_ptr = lock->get();
  supervisor.add_listener([lock_ptr, who](const engine::Transition&, const engine::SupervisorStatus& st) {
    if (st.endpoint)
      lock_ptr->update(fmt::format("{}, engine pid {} on port {}", who, st.pid, st.endpoint->port));
  });

  // 4. The gateway. It listens before the engine starts: a port held by another process is
  // an error, never a silent move to another port (this process holds the lock, so it is
  // not another kvgate up).
  gateway::GatewayOptions go = gateway_options(cfg, {.n_ctx_slot = memory->n_ctx_slot,
                                                      .slots = static_cast<int>(std::max<uint32_t>(1, settings.parallel)),
                                                      .fork = caps.fork,
                                                      .max_token_bytes = longest_token_bytes(*gguf_file),
                                                      .shifts = shifts,
                                                      .model_name = settings.alias.value_or(model->filename().string())});
  go.on_engine_failure = [&supervisor](const std::string& what) { supervisor.report_upstream_failure(what); };
  go.on_requests_failing = [&supervisor](const std::string& what) { supervisor.report_requests_failing(what); };
  go.kv = *kv;
  auto upstream = std::make_shared<gateway::HttpUpstream>([&supervisor]() {
    const auto st = supervisor.status();
    gateway::EngineEndpoint ep;
    ep.available = engine::is_serving(st.state) && st.endpoint.has_value();
    ep.state = engine::state_name(st.state);
    if (st.endpoint) {
      ep.host = st.endpoint->host;
      ep.port = st.endpoint->port;
      ep.api_key = st.endpoint->api_key;
    }
    return ep;
  });
  if (cfg.prefill_report) {
    auto prefill = bench::load_prefill_summary(*cfg.prefill_report);
    if (!prefill) return fail("--prefill-report " + prefill.error().message(), kExitUsage);
    go.bench_prefill = std::move(*prefill);
  }
  // The status page's engine and memory panels; uptime counts from the engine's readiness.
  auto ready_since = std::make_shared<std::atomic<int64_t>>(0);  // steady ms, 0: not serving
  const std::string budget_source = cfg.memory_budget ? "--memory" : dev.unified_memory ? "MemAvailable" : "";
  go.engine_report = [&supervisor, ready_since, caps, plan = *memory, budget, budget_source] {
    const auto st = supervisor.status();
    const int64_t since = ready_since->load();
    std::optional<double> uptime;
    if (since > 0 && engine::is_serving(st.state)) uptime = static_cast<double>(steady_ms() - since) / 1000.0;
    const engine::ReportedMemory* reported = st.verification ? &st.verification->reported : nullptr;
    return nlohmann::json{{"engine", engine::engine_status_json(st, caps.fork, caps.describe(), uptime)},
                          {"memory", engine::memory_status_json(plan, budget, budget_source, reported)}};
  };
  gateway::Gateway gw(go, upstream);
  std::string state_note = "sessions in memory only";
  if (cfg.state_dir.value_or("") != "none") {
    if (auto st = gw.open_store(instance_dir / "sessions.db"); !st) return fail(st.error().message());
    state_note = "sessions kept in " + (instance_dir / "sessions.db").string();
  }
  if (go.kv.enabled()) {
    if (auto st = gw.open_kv_states(); !st) return fail(st.error().message());
    state_note += fmt::format("; conversations' engine state saved in {} (up to {})", go.kv.dir.string(),
                              util::format_bytes(go.kv.disk_budget_bytes));
  } else {
    state_note += "; engine state not saved";
  }
  uint64_t seen_generation = 0;
  supervisor.add_listener([&gw, &seen_generation, ready_since](const engine::Transition&,
                                                                const engine::SupervisorStatus& st) {
    if (st.generation != seen_generation) {
      if (seen_generation != 0) gw.on_engine_restart();
      seen_generation = st.generation;
    }
    if (!engine::is_serving(st.state)) {
      ready_since->store(0);
    } else if (ready_since->load() == 0) {
      ready_since->store(steady_ms());
    }
  });
  http::HttpServerOptions http;
  http.host = cfg.listen.host;
  http.port = cfg.listen.port;
  http.max_body_bytes = cfg.max_body_bytes;
  // Route and key are checked from the head, before a body is read (and connections that
  // have not shown a key live in their own, smaller pool).
  http.head_check = [&gw](const http::HttpRequest& head) { return gw.check_head(head); };
  http::HttpServer server_front(http, [&gw](const http::HttpRequest& r, http::ResponseWriter& w) {
    gw.handle(r, w);
  });
  if (auto st = server_front.start(); !st) return fail(st.error().message() + " (no kvgate up holds it: another program does)");
  // A host name that resolved to a non-loopback address needs the key as well.
  if (!server_front.bound_loopback() && !cfg.api_key) {
    return fail(fmt::format("--listen {} resolves to a non-loopback address: give --api-key so clients must authenticate",
                            cfg.listen.host),
                kExitUsage);
  }
  const std::string gateway_url = fmt::format("http://{}:{}", cfg.listen.host, server_front.port());

  say(fmt::format("engine: {}", caps.describe()));
  say(fmt::format("plan: {}", plan_summary(*memory, budget)));
  say(fmt::format("engine log: {}", (log_dir / "engine.log").string()));
  supervisor.start();

  // 5. Serve until a signal, or until the supervisor gives up.
  bool announced = false;
  int exit_code = kExitOk;
  for (;;) {
    siginfo_t info{};
    const timespec tick{0, 200 * 1000 * 1000};
    const int sig = ::sigtimedwait(&stop_signals, &info, &tick);
    if (sig > 0) {
      say(fmt::format("{} received: stopping", ::strsignal(sig)));
      break;
    }
    const auto st = supervisor.status();
    if (st.state == engine::State::kFailed) {
      say("giving up: " + st.cause);
      say(fmt::format("the engine's whole output: {}", (log_dir / "engine.log").string()));
      exit_code = kExitFailure;
      break;
    }
    if (!announced && engine::is_serving(st.state)) {
      announced = true;
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
      say(fmt::format("gateway: {}/v1  ({}; compaction {} at {} tokens{})", gateway_url, state_note,
                      go.compaction ? "on" : "off", go.high_watermark_tokens.value_or(0), cfg.api_key ? "; clients send --api-key" : ""));
      std::fflush(stderr);
    }
  }
  // What the slots hold is saved while the engine still runs, so the next start restores it.
  if (exit_code == kExitOk && engine::is_serving(supervisor.status().state)) gw.save_kv_states();
  // The engine first: streams still relayed end with it, so the gateway's connections can
  // finish and stop() returns promptly.
  supervisor.stop();
  server_front.stop();
  std::error_code ec;
  fs::remove(key_file, ec);  // the next start writes a new key
  return exit_code;
}

}  // namespace kvgate::cli
