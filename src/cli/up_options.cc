#include "cli/up_options.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <span>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "device/tree.h"
#include "util/units.h"

namespace kvgate::cli {
namespace {

template <typename T>
Result<T> number(const std::string& name, const std::string& v, T min, T max) {
  T out{};
  auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec != std::errc() || ptr != v.data() + v.size() || out < min || out > max) {
    return Error(fmt::format("--{} '{}': expected a whole number from {} to {}", name, v, min, max));
  }
  return out;
}

Result<bool> on_off(const std::string& name, const std::string& v) {
  if (v == "on" || v == "true" || v == "1") return true;
  if (v == "off" || v == "false" || v == "0") return false;
  return Error(fmt::format("--{} '{}': expected on or off", name, v));
}

// Where a value goes: a member of UpConfig or of one of its parts (the `Where` of the readers
// below).
template <auto Member>
auto& config(UpConfig& c) {
  return c.*Member;
}
template <auto Member>
auto& setting(UpConfig& c) {
  return c.settings.*Member;
}
template <auto Member>
auto& timing(UpConfig& c) {
  return c.timing.*Member;
}
template <auto Member>
auto& restart(UpConfig& c) {
  return c.restart.*Member;
}

// How a value is read: each reader checks `v`, names the option in its error and stores the
// result at `Where(c)`.
template <auto Where>
Status text(const std::string&, const std::string& v, UpConfig& c) {
  Where(c) = v;
  return {};
}

constexpr uint32_t kMaxU32 = std::numeric_limits<uint32_t>::max();

template <auto Min, auto Max, auto Where>
Status whole(const std::string& name, const std::string& v, UpConfig& c) {
  KV_ASSIGN_OR_RETURN(Where(c), number<decltype(Min)>(name, v, Min, Max));
  return {};
}

template <auto Where>
Status switch_on_off(const std::string& name, const std::string& v, UpConfig& c) {
  KV_ASSIGN_OR_RETURN(Where(c), on_off(name, v));
  return {};
}

template <auto Where>
Status positive_duration(const std::string& name, const std::string& v, UpConfig& c) {
  auto d = parse_duration(v);
  if (!d) return Error(fmt::format("--{}: {}", name, d.error().message()));
  if (d->count() <= 0) return Error(fmt::format("--{}: must be positive", name));
  Where(c) = *d;
  return {};
}

template <auto Where>
Status duration_or_zero(const std::string& name, const std::string& v, UpConfig& c) {
  auto d = parse_duration(v);
  if (!d) return Error(fmt::format("--{}: {}", name, d.error().message()));
  if (d->count() < 0) return Error(fmt::format("--{}: must not be negative", name));
  Where(c) = *d;
  return {};
}

template <auto Where>
Status byte_size(const std::string& name, const std::string& v, UpConfig& c) {
  auto b = util::parse_bytes(v);
  if (!b) return Error(fmt::format("--{} '{}': {}", name, v, b.error().message()));
  Where(c) = *b;
  return {};
}

template <uint64_t MinKiB, auto Where>
Status size_at_least(const std::string& name, const std::string& v, UpConfig& c) {
  auto b = util::parse_bytes(v);
  if (!b || *b < MinKiB * util::kKiB) {
    return Error(fmt::format("--{} '{}': expected a size of at least {}KiB", name, v, MinKiB));
  }
  Where(c) = *b;
  return {};
}

template <auto Where>
Status watermark(const std::string& name, const std::string& v, UpConfig& c) {
  Watermark w;
  if (!v.empty() && v.back() == '%') {
    double pct = 0;
    auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size() - 1, pct);
    if (ec != std::errc() || ptr != v.data() + v.size() - 1 || pct <= 0 || pct > 100) {
      return Error(fmt::format("--{} '{}': expected a percentage from 1% to 100%", name, v));
    }
    w.fraction = pct / 100.0;
  } else {
    auto t = util::parse_tokens(v);
    if (!t || *t == 0) return Error(fmt::format("--{} '{}': expected tokens (e.g. 24k) or a percentage", name, v));
    w.tokens = *t;
  }
  Where(c) = w;
  return {};
}

Status listen_address(const std::string&, const std::string& v, UpConfig& c) {
  KV_ASSIGN_OR_RETURN(c.listen, parse_listen(v));
  return {};
}

Status allowed_hosts(const std::string&, const std::string& v, UpConfig& c) {
  KV_ASSIGN_OR_RETURN(c.allowed_hosts, parse_allowed_hosts(v));
  return {};
}

// --api-key K1,K2 or --api-key-file FILE (one key per line; blank lines and # comments skipped).
Status api_keys(const std::string& name, const std::string& value, UpConfig& c) {
  std::vector<std::string> keys;
  if (name == "api-key") {
    std::stringstream in(value);
    for (std::string k; std::getline(in, k, ',');) keys.push_back(k);
  } else {
    KV_ASSIGN_OR_RETURN(keys, keys_in_file(value));
  }
  for (const auto& k : keys) {
    if (k.empty()) return Error(fmt::format("--{}: empty key", name));
    for (char ch : k) {
      if (static_cast<unsigned char>(ch) <= 0x20 || ch == 0x7f) {
        return Error(fmt::format("--{}: a key may not contain spaces or control characters", name));
      }
    }
    c.api_keys.push_back(k);
  }
  c.api_key = c.api_keys.front();
  return {};
}

Status context(const std::string&, const std::string& v, UpConfig& c) {
  auto t = util::parse_tokens(v);
  if (!t || *t == 0 || *t > kMaxU32) {
    return Error(fmt::format("--ctx '{}': expected a token count such as 4096 or 64k", v));
  }
  c.settings.ctx = static_cast<uint32_t>(*t);
  return {};
}

Status gpu_layers(const std::string& name, const std::string& v, UpConfig& c) {
  if (v == "all") {
    c.n_gpu_layers = -1;
    return {};
  }
  KV_ASSIGN_OR_RETURN(c.n_gpu_layers, number<int32_t>(name, v, -1, 100000));
  return {};
}

Status flash_attn(const std::string&, const std::string& v, UpConfig& c) {
  if (v == "on") {
    c.settings.flash_attn = plan::FlashAttn::kOn;
  } else if (v == "off") {
    c.settings.flash_attn = plan::FlashAttn::kOff;
  } else if (v == "auto") {
    c.settings.flash_attn = plan::FlashAttn::kAuto;
  } else {
    return Error(fmt::format("--flash-attn '{}': expected on, off or auto", v));
  }
  return {};
}

// --kvu and --no-kvu: either may be given, not both.
Status kv_unified(const std::string& name, const std::string& v, UpConfig& c) {
  KV_ASSIGN_OR_RETURN(const bool on, on_off(name, v));
  if (!on) return {};
  auto& unified = c.settings.kv_unified;
  if (unified && *unified != (name == "kvu")) return Error("--kvu and --no-kvu contradict each other");
  unified = name == "kvu";
  return {};
}

// --engine-devices 0,1 (engine 0 on GPU 0, engine 1 on GPU 1); 0+1,2+3 gives each engine two.
// Each set becomes that engine's CUDA_VISIBLE_DEVICES: indices or GPU-/MIG- UUIDs.
Status engine_devices(const std::string&, const std::string& v, UpConfig& c) {
  auto gpu = [](std::string_view g) {
    return !g.empty() && std::all_of(g.begin(), g.end(), [](char ch) {
      return std::isalnum(static_cast<unsigned char>(ch)) || ch == '-';
    });
  };
  c.engine_devices.clear();
  for (std::string_view piece : device::split(v, ',')) {
    const auto gpus = device::split(piece, '+');
    if (!std::all_of(gpus.begin(), gpus.end(), gpu)) {
      return Error(fmt::format(
          "--engine-devices '{}': expected one GPU set per engine, e.g. 0,1 (0+1 gives an engine two GPUs)",
          v));
    }
    std::string set(piece);
    std::replace(set.begin(), set.end(), '+', ',');
    c.engine_devices.push_back(std::move(set));
  }
  return {};
}

Status cache_ram(const std::string&, const std::string& v, UpConfig& c) {
  auto b = util::parse_bytes(v);  // a bare number is MiB, like the engine's -cram
  if (!b) return Error(fmt::format("--cache-ram '{}': {}", v, b.error().message()));
  c.settings.cache_ram_mib = *b / util::kMiB;
  return {};
}

Status cache_ram_similarity(const std::string&, const std::string& v, UpConfig& c) {
  double d = 0;
  auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), d);
  if (ec != std::errc() || ptr != v.data() + v.size() || d < 0 || d > 1) {
    return Error(fmt::format("--cache-ram-similarity '{}': expected a fraction from 0 to 1", v));
  }
  c.settings.cache_ram_similarity = d;
  return {};
}

Status on_mismatch(const std::string&, const std::string& v, UpConfig& c) {
  if (v == "fail") {
    c.on_mismatch = engine::OnMismatch::kFail;
  } else if (v == "warn") {
    c.on_mismatch = engine::OnMismatch::kWarn;
  } else {
    return Error(fmt::format("--on-mismatch '{}': expected fail or warn", v));
  }
  return {};
}

Status kv_save_every(const std::string&, const std::string& v, UpConfig& c) {
  auto t = util::parse_tokens(v);
  if (!t || *t == 0) return Error(fmt::format("--kv-save-every '{}': expected tokens (e.g. 4k)", v));
  c.kv_save_every = *t;
  return {};
}

using Settings = plan::ServerSettings;
using Timing = engine::SupervisorTiming;
using Restart = engine::RestartPolicy;

constexpr UpOptionInfo kOptions[] = {
    {"listen", listen_address, "where the gateway listens, HOST:PORT (default 127.0.0.1:8787)"},
    {"allow-host", allowed_hosts,
     "a host name clients reach the gateway by, besides localhost, IP addresses and the listen address (other "
     "Host headers get 403: a defence against DNS rebinding); repeat it or separate by commas; '*' accepts any"},
    {"api-key", api_keys,
     "key clients must send (Authorization: Bearer KEY), or several, comma-separated, each its own scope; "
     "required off loopback"},
    {"api-key-file", api_keys,
     "file with the client keys, one per line (kept off the command line); as --api-key"},
    {"server", text<config<&UpConfig::server>>,
     "llama-server binary (default: $KVGATE_SERVER, then the pinned build)"},
    {"ctx", context, "total context in tokens, e.g. 4096, 64k (default 4096)", false, "-c"},
    {"ctk", text<setting<&Settings::cache_type_k>>, "K cache type (default f16)"},
    {"ctv", text<setting<&Settings::cache_type_v>>, "V cache type (default: the K type)"},
    {"parallel", whole<1u, kMaxU32, setting<&Settings::parallel>>, "slots (default 1)", false, "--np"},
    {"batch", whole<1u, kMaxU32, setting<&Settings::batch>>, "logical batch (default 2048)"},
    {"ubatch", whole<1u, kMaxU32, setting<&Settings::ubatch>>, "physical batch (default 512)", false, "--ub"},
    {"ngl", gpu_layers,
     "layers on the GPU: a number or all (default: all when the build can offload, else 0)"},
    {"memory", byte_size<config<&UpConfig::memory_budget>>,
     "memory budget, e.g. 32GiB: refuse to start when the plan exceeds it (default on unified "
     "memory, e.g. a Jetson: MemAvailable)"},
    {"reserve", byte_size<config<&UpConfig::reserve>>,
     "memory kept free for OS and driver within the budget (default 1GiB)"},
    {"flash-attn", flash_attn, "on|off|auto (default auto)", false, "--fa"},
    {"kvu", kv_unified, "one KV pool shared by all slots (mainline -kvu)", true},
    {"no-kvu", kv_unified, "a KV pool per slot (mainline -no-kvu)", true},
    {"swa-full", switch_on_off<setting<&Settings::swa_full>>,
     "full-size sliding-window cache (mainline --swa-full)", true},
    {"cache-ram", cache_ram, "host prompt cache limit (-cram), e.g. 8GiB or 8192 (MiB); 0 disables"},
    {"cache-reuse", whole<0u, kMaxU32, setting<&Settings::cache_reuse>>,
     "mainline --cache-reuse N (chunk reuse by KV shift)"},
    {"cache-ram-similarity", cache_ram_similarity, "ik -crs F"},
    {"cache-ram-n-min", whole<0u, kMaxU32, setting<&Settings::cache_ram_n_min>>, "ik -cram-n-min N"},
    {"ctx-checkpoints", whole<0u, kMaxU32, setting<&Settings::ctx_checkpoints>>,
     "context checkpoints per slot"},
    {"ctx-checkpoint-tolerance", whole<0u, kMaxU32, setting<&Settings::ctx_checkpoint_tolerance>>,
     "ik -ctx-ckpt-t N (default for hybrid/recurrent models on ik: 16)"},
    {"context-shift", switch_on_off<setting<&Settings::context_shift>>,
     "on|off (default off: kvgate compacts instead)"},
    {"jinja", switch_on_off<setting<&Settings::jinja>>, "on|off (default on)"},
    {"stable-template", switch_on_off<config<&UpConfig::stable_template>>,
     "on|off: with thinking off, start the engine with the model's template made to render past replies as "
     "generated, where it drops their think blocks (default on)"},
    {"timeout", whole<1u, kMaxU32, setting<&Settings::timeout_s>>,
     "engine socket time-out in seconds (default 3600)"},
    {"threads", whole<1u, kMaxU32, setting<&Settings::threads>>, "engine CPU threads"},
    {"mla", whole<0, 3, setting<&Settings::mla>>, "ik -mla 0..3"},
    {"alias", text<setting<&Settings::alias>>, "model name the engine reports"},
    {"on-mismatch", on_mismatch,
     "fail|warn: what a startup log that contradicts the plan does (default fail)"},
    {"log-dir", text<config<&UpConfig::log_dir>>,
     "engine log directory (default ~/.cache/kvgate/logs/up-HOST-PORT)"},
    {"log-max-size", size_at_least<4, config<&UpConfig::log_max_bytes>>,
     "rotate the engine log at this size (default 20MiB)"},
    {"log-keep", whole<0, 1000, config<&UpConfig::log_keep>>, "rotated engine logs kept (default 5)"},
    {"health-interval", positive_duration<timing<&Timing::health_interval>>,
     "time between deep health probes (default 10s)"},
    {"probe-timeout", positive_duration<timing<&Timing::probe_timeout>>,
     "time-out of one deep probe (default 5s)"},
    {"start-timeout", positive_duration<timing<&Timing::start_timeout>>, "spawn to /health 200 (default 5m)"},
    {"ready-timeout", positive_duration<timing<&Timing::ready_timeout>>,
     "/health 200 to a completed token (default 2m)"},
    {"stop-grace", positive_duration<timing<&Timing::stop_grace>>, "SIGTERM to SIGKILL (default 10s)"},
    {"zombie-after", whole<1, 1000, restart<&Restart::zombie_after>>,
     "failed deep probes in a row that make the engine a zombie (default 3)"},
    {"backoff", positive_duration<restart<&Restart::backoff_initial>>,
     "first restart delay (default 1s), doubling per restart"},
    {"backoff-max", positive_duration<restart<&Restart::backoff_max>>, "restart delay cap (default 60s)"},
    {"max-failed-starts", whole<0, 1000000, restart<&Restart::max_failed_starts>>,
     "starts in a row that never get ready before giving up (default 5; 0 = never)"},
    {"state-dir", text<config<&UpConfig::state_dir>>,
     "where sessions are kept across restarts (default ~/.cache/kvgate/state/up-HOST-PORT; 'none': memory "
     "only)"},
    {"kv-disk", byte_size<config<&UpConfig::kv_disk>>,
     "disk for conversations' saved engine state, restored after restarts and slot contention (default 10% "
     "of the free space in the state directory, at most 64GiB; 0 = off)"},
    {"kv-save-every", kv_save_every,
     "save a conversation's state after a turn once it grew by this many tokens (default: after every turn "
     "while a save costs at most 5% of the prefill a restore of it replaces, from measured speeds)"},
    {"thinking", switch_on_off<config<&UpConfig::thinking>>,
     "on|off: the default for clients that do not ask (default off)"},
    {"compaction", switch_on_off<config<&UpConfig::compaction>>,
     "on|off: compact conversations before they overflow (default on)"},
    {"high-watermark", watermark<config<&UpConfig::high_watermark>>,
     "compact when a prompt would pass this: tokens or a percentage of the slot context (default: the "
     "planner's safe cap, 3/4 of the slot)"},
    {"low-watermark", watermark<config<&UpConfig::low_watermark>>,
     "compact down to this: tokens or a percentage of the high watermark (default 55%)"},
    {"max-body", size_at_least<1, config<&UpConfig::max_body_bytes>>,
     "largest request body accepted (default 64MiB)"},
    {"max-sessions", whole<1u, 10000000u, config<&UpConfig::max_sessions>>,
     "sessions kept in memory (default 1024; more stay in the state directory)"},
    {"session-retention", duration_or_zero<config<&UpConfig::session_retention>>,
     "sessions unused for this long are removed from the state directory, with their history, at start and "
     "every 10 minutes (default 30d; 0 = kept however old)"},
    {"max-stored-sessions", whole<0u, 100000000u, config<&UpConfig::max_stored_sessions>>,
     "sessions kept in the state directory; beyond it the least recently used are removed (default 20000; 0 = "
     "no bound)"},
    {"keepalive", positive_duration<config<&UpConfig::keepalive>>,
     "SSE keep-alive interval while the engine is silent (default 10s)"},
    {"max-inflight", whole<1u, 100000u, config<&UpConfig::max_inflight>>,
     "requests working with the engine at once (default: --parallel)"},
    {"max-queue", whole<0u, 1000000u, config<&UpConfig::max_queue>>,
     "requests waiting for the engine; beyond it new ones get 429 with Retry-After (default 64)"},
    {"queue-timeout", positive_duration<config<&UpConfig::queue_timeout>>,
     "longest wait for the engine before a 429 with Retry-After (default 2m)"},
    {"upstream-timeout", positive_duration<config<&UpConfig::upstream_timeout>>,
     "engine silence tolerated before a 504 or an in-stream error (default 5m; longer for long prompts)"},
    {"generation-timeout", positive_duration<config<&UpConfig::generation_timeout>>,
     "added to the upstream time-out for a non-streamed answer (default 10m)"},
    {"default-max-tokens", whole<0u, 100000000u, config<&UpConfig::default_max_tokens>>,
     "output limit for a request that sets none (Codex sends none): it then ends with finish reason "
     "\"length\" (default 16384; 0 = none, the engine decodes until the context is full)"},
    {"max-messages", whole<1u, 1000000u, config<&UpConfig::max_messages>>,
     "messages one chat request may carry; more get 413 (default 4096)"},
    {"count-timeout", positive_duration<config<&UpConfig::count_timeout>>,
     "longest time counting one prompt's tokens may take; then 413 (default 30s)"},
    {"compaction-timeout", positive_duration<config<&UpConfig::compaction_timeout>>,
     "longest time one compaction may take; then 400 (default 60s)"},
    {"prefill-report", text<config<&UpConfig::prefill_report>>,
     "the prefill.json of a `kvgate bench prefill` run, shown on the status page"},
    {"engines", whole<1u, 64u, config<&UpConfig::engines>>,
     "engines of the model run side by side, each supervised, behind the one gateway (default 1): each "
     "conversation stays on the engine holding its cache, one that fails is taken out and its conversations "
     "served by the others; the memory budget must hold them all, and the CPU threads are shared among them "
     "unless --threads is given"},
    {"engine-devices", engine_devices,
     "with --engines: each engine's GPUs as CUDA_VISIBLE_DEVICES, one set per engine, e.g. 0,1 (0+1 gives an "
     "engine two); engines on GPUs of their own are each held to the memory budget alone (default: every "
     "engine sees every GPU)"},
};

// `kvgate serve` runs the gateway only: these options of the table, and its own.
constexpr std::string_view kServeNames[] = {
    "listen", "allow-host", "api-key", "api-key-file", "health-interval", "probe-timeout", "state-dir", "thinking", "compaction",
    "high-watermark", "low-watermark", "max-body", "max-sessions", "session-retention", "max-stored-sessions",
    "keepalive", "max-inflight", "max-queue", "queue-timeout", "upstream-timeout", "generation-timeout",
    "default-max-tokens", "max-messages", "count-timeout", "compaction-timeout", "prefill-report"};
constexpr UpOptionInfo kServeOnly[] = {
    {"upstream", text<config<&UpConfig::upstream>>,
     "the server to put the gateway in front of: http://HOST:PORT of a llama-server (mainline or "
     "ik_llama.cpp); repeat it (or separate by commas) for several, each conversation kept on one"},
    {"upstream-key", text<config<&UpConfig::upstream_key>>, "the API key that server wants (its --api-key)"},
    {"conversation-header", text<config<&UpConfig::conversation_header>>,
     "send each conversation's stable id to the upstream in this header (e.g. x-session-id for a router with "
     "session affinity, such as vLLM's --routing-logic session)"},
    {"conversation-field", text<config<&UpConfig::conversation_field>>,
     "send each conversation's stable id in this field of the request body (e.g. user)"},
    {"routing", text<config<&UpConfig::routing>>,
     "with several upstreams: affinity (default: a conversation stays on the engine holding its cache) or "
     "round-robin (a baseline)"},
};

bool in_set(std::string_view name, OptionSet set) {
  if (set == OptionSet::kServe) {
    for (auto n : kServeNames) {
      if (n == name) return true;
    }
    for (const auto& o : kServeOnly) {
      if (o.name == name) return true;
    }
    return false;
  }
  for (const auto& o : kOptions) {
    if (o.name == name) return true;
  }
  return false;
}

bool known(std::string_view name, OptionSet set = OptionSet::kUp) { return in_set(name, set); }

}  // namespace

std::span<const UpOptionInfo> up_option_table() { return kOptions; }

void add_up_options(CLI::App& app, UpOptions& options, OptionSet set) {
  if (set == OptionSet::kUp) {
    app.add_option("model", options.model, "GGUF model (default: the built-in default model, written when missing)");
  }
  app.add_option("--config", options.config, "JSON file with these options (the command line wins)");
  std::vector<UpOptionInfo> table;
  for (const auto& o : kOptions) {
    if (in_set(o.name, set)) table.push_back(o);
  }
  if (set == OptionSet::kServe) table.insert(table.end(), std::begin(kServeOnly), std::end(kServeOnly));
  for (const auto& o : table) {
    const std::string name(o.name);
    std::string spelling = "--" + name;
    if (!o.aliases.empty()) spelling += "," + std::string(o.aliases);
    if (o.flag) {
      app.add_flag_callback(
          spelling, [&options, name] { options.values[name] = "on"; }, std::string(o.help));
    } else if (name == "upstream" || name == "allow-host") {  // may be repeated: the values are joined by commas
      app.add_option_function<std::vector<std::string>>(
             spelling,
             [&options, name](const std::vector<std::string>& vs) {
               std::string joined;
               for (const auto& v : vs) joined += (joined.empty() ? "" : ",") + v;
               options.values[name] = joined;
             },
             std::string(o.help))
          ->take_all()
          ->allow_extra_args(false);
    } else {
      app.add_option_function<std::string>(
          spelling, [&options, name](const std::string& v) { options.values[name] = v; },
          std::string(o.help));
    }
  }
}

Status merge_config_json(std::string_view json, std::string_view origin, UpOptions& options, OptionSet set) {
  const auto doc = nlohmann::json::parse(json, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) return Error(fmt::format("{}: not a JSON object", origin));
  for (const auto& [raw_key, value] : doc.items()) {
    std::string key = raw_key;
    for (char& c : key) c = c == '_' ? '-' : c;
    std::string text;
    if (value.is_string()) {
      text = value.get<std::string>();
    } else if (value.is_boolean()) {
      text = value.get<bool>() ? "on" : "off";
    } else if (value.is_number()) {
      text = value.dump();
    } else if (value.is_null()) {
      continue;
    } else if ((key == "upstream" || key == "allow-host") && value.is_array() && !value.empty()) {
      for (const auto& u : value) {
        if (!u.is_string()) return Error(fmt::format("{}: \"{}\" must hold strings", origin, raw_key));
        text += (text.empty() ? "" : ",") + u.get<std::string>();
      }
    } else {
      return Error(fmt::format("{}: \"{}\" must be a string, number or boolean", origin, raw_key));
    }
    if (key == "model" && set == OptionSet::kUp) {
      if (!options.model) options.model = text;
    } else if (key == "config") {
      return Error(fmt::format("{}: a config file cannot name another config file", origin));
    } else if (!known(key, set)) {
      const char* command = set == OptionSet::kUp ? "up" : "serve";
      return Error(fmt::format("{}: unknown option \"{}\" (kvgate {} --help lists them)", origin, raw_key, command));
    } else if (!options.values.count(key)) {
      options.values[key] = text;
    }
  }
  return {};
}

Status merge_config_file(const std::string& path, UpOptions& options, OptionSet set) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error(fmt::format("cannot read config file '{}'", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return merge_config_json(ss.str(), path, options, set);
}

std::vector<std::string> to_up_args(const UpOptions& options) {
  std::vector<std::string> out;
  if (options.model) out.push_back(*options.model);
  if (options.config) out.insert(out.end(), {"--config", *options.config});
  for (const auto& o : kOptions) {
    auto it = options.values.find(std::string(o.name));
    if (it == options.values.end()) continue;
    if (!o.flag) {
      out.insert(out.end(), {"--" + it->first, it->second});
    } else if (it->second == "on") {
      out.push_back("--" + it->first);
    }
  }
  return out;
}

namespace {

const UpOptionInfo* find_option(std::string_view name) {
  for (std::span<const UpOptionInfo> table : {std::span<const UpOptionInfo>(kOptions), std::span<const UpOptionInfo>(kServeOnly)}) {
    for (const auto& o : table) {
      if (o.name == name) return &o;
    }
  }
  return nullptr;
}

// With several client keys the engine's host-memory prompt cache is off: it hands a prompt
// state to any slot whose new prompt starts the same way, whichever key sent either, and the
// gateway cannot see or clear it (docs/GATEWAY.md, "Keys and the engine's cache").
Status keep_keys_apart(UpConfig& c) {
  if (c.api_keys.size() < 2) return {};
  if (c.settings.cache_ram_mib.value_or(0) > 0) {
    return Error(fmt::format("--cache-ram {} MiB with {} client keys: the engine's host prompt cache would let one "
                             "key reuse, and so read, another key's prompts; leave --cache-ram out (kvgate turns it "
                             "off with several keys) or use one key",
                             *c.settings.cache_ram_mib, c.api_keys.size()));
  }
  c.settings.cache_ram_mib = 0;
  return {};
}

}  // namespace

Result<UpConfig> resolve_up_options(const UpOptions& options) {
  UpConfig c;
  c.model = options.model;
  for (const auto& [name, value] : options.values) {
    const UpOptionInfo* o = find_option(name);
    if (o == nullptr) return Error(fmt::format("unknown option --{}", name));
    KV_TRY(o->read(name, value, c));
  }
  // --ctv defaults to the K type.
  if (options.values.count("ctk") && !options.values.count("ctv")) c.settings.cache_type_v = c.settings.cache_type_k;
  if (c.restart.backoff_max < c.restart.backoff_initial) c.restart.backoff_max = c.restart.backoff_initial;
  // --engine-devices alone says how many engines.
  if (!c.engine_devices.empty()) {
    if (!options.values.count("engines")) c.engines = static_cast<uint32_t>(c.engine_devices.size());
    if (c.engine_devices.size() != c.engines) {
      return Error(fmt::format("--engine-devices names {} GPU sets for {} engines: give one per engine",
                               c.engine_devices.size(), c.engines));
    }
  }
  KV_TRY(keep_keys_apart(c));
  return c;
}

}  // namespace kvgate::cli
