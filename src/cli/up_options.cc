#include "cli/up_options.h"

#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "util/units.h"

namespace kvgate::cli {
namespace {

constexpr UpOptionInfo kOptions[] = {
    {"listen", "where the gateway listens, HOST:PORT (default 127.0.0.1:8787)"},
    {"api-key", "key clients must send (Authorization: Bearer KEY), or several, comma-separated, each its own scope; required off loopback"},
    {"api-key-file", "file with the client keys, one per line (kept off the command line); as --api-key"},
    {"server", "llama-server binary (default: $KVGATE_SERVER, then the pinned build)"},
    {"ctx", "total context in tokens, e.g. 4096, 64k (default 4096)", false, "-c"},
    {"ctk", "K cache type (default f16)"},
    {"ctv", "V cache type (default: the K type)"},
    {"parallel", "slots (default 1)", false, "--np"},
    {"batch", "logical batch (default 2048)"},
    {"ubatch", "physical batch (default 512)", false, "--ub"},
    {"ngl", "layers on the GPU: a number or all (default: all when the build can offload, else 0)"},
    {"memory", "memory budget, e.g. 32GiB: refuse to start when the plan exceeds it (default on unified "
               "memory, e.g. a Jetson: MemAvailable)"},
    {"reserve", "memory kept free for OS and driver within the budget (default 1GiB)"},
    {"flash-attn", "on|off|auto (default auto)", false, "--fa"},
    {"kvu", "one KV pool shared by all slots (mainline -kvu)", true},
    {"no-kvu", "a KV pool per slot (mainline -no-kvu)", true},
    {"swa-full", "full-size sliding-window cache (mainline --swa-full)", true},
    {"cache-ram", "host prompt cache limit (-cram), e.g. 8GiB or 8192 (MiB); 0 disables"},
    {"cache-reuse", "mainline --cache-reuse N (chunk reuse by KV shift)"},
    {"cache-ram-similarity", "ik -crs F"},
    {"cache-ram-n-min", "ik -cram-n-min N"},
    {"ctx-checkpoints", "context checkpoints per slot"},
    {"ctx-checkpoint-tolerance", "ik -ctx-ckpt-t N (default for hybrid/recurrent models on ik: 16)"},
    {"context-shift", "on|off (default off: kvgate compacts instead)"},
    {"jinja", "on|off (default on)"},
    {"timeout", "engine socket time-out in seconds (default 3600)"},
    {"threads", "engine CPU threads"},
    {"mla", "ik -mla 0..3"},
    {"alias", "model name the engine reports"},
    {"on-mismatch", "fail|warn: what a startup log that contradicts the plan does (default fail)"},
    {"log-dir", "engine log directory (default ~/.cache/kvgate/logs/up-HOST-PORT)"},
    {"log-max-size", "rotate the engine log at this size (default 20MiB)"},
    {"log-keep", "rotated engine logs kept (default 5)"},
    {"health-interval", "time between deep health probes (default 10s)"},
    {"probe-timeout", "time-out of one deep probe (default 5s)"},
    {"start-timeout", "spawn to /health 200 (default 5m)"},
    {"ready-timeout", "/health 200 to a completed token (default 2m)"},
    {"stop-grace", "SIGTERM to SIGKILL (default 10s)"},
    {"zombie-after", "failed deep probes in a row that make the engine a zombie (default 3)"},
    {"backoff", "first restart delay (default 1s), doubling per restart"},
    {"backoff-max", "restart delay cap (default 60s)"},
    {"max-failed-starts", "starts in a row that never get ready before giving up (default 5; 0 = never)"},
    {"state-dir", "where sessions are kept across restarts (default ~/.cache/kvgate/state/up-HOST-PORT; 'none': memory only)"},
    {"kv-disk", "disk for conversations' saved engine state, restored after restarts and slot contention (default 10% of the free space in the state directory, at most 64GiB; 0 = off)"},
    {"kv-save-every", "save a conversation's state after a turn once it grew by this many tokens (default: after every turn while a save costs at most 5% of the prefill a restore of it replaces, from measured speeds)"},
    {"thinking", "on|off: the default for clients that do not ask (default off)"},
    {"compaction", "on|off: compact conversations before they overflow (default on)"},
    {"high-watermark", "compact when a prompt would pass this: tokens or a percentage of the slot context (default: the planner's safe cap, 3/4 of the slot)"},
    {"low-watermark", "compact down to this: tokens or a percentage of the high watermark (default 55%)"},
    {"max-body", "largest request body accepted (default 64MiB)"},
    {"max-sessions", "sessions kept in memory (default 1024; more stay in the state directory)"},
    {"keepalive", "SSE keep-alive interval while the engine is silent (default 10s)"},
    {"max-inflight", "requests working with the engine at once (default: --parallel)"},
    {"max-queue", "requests waiting for the engine; beyond it new ones get 429 with Retry-After (default 64)"},
    {"queue-timeout", "longest wait for the engine before a 429 with Retry-After (default 2m)"},
    {"upstream-timeout", "engine silence tolerated before a 504 or an in-stream error (default 5m; longer for long prompts)"},
    {"generation-timeout", "added to the upstream time-out for a non-streamed answer (default 10m)"},
    {"max-messages", "messages one chat request may carry; more get 413 (default 4096)"},
    {"count-timeout", "longest time counting one prompt's tokens may take; then 413 (default 30s)"},
    {"compaction-timeout", "longest time one compaction may take; then 400 (default 60s)"},
    {"prefill-report", "the prefill.json of a `kvgate bench prefill` run, shown on the status page"},
};

// `kvgate serve` runs the gateway only: these options of the table, and its own.
constexpr std::string_view kServeNames[] = {
    "listen", "api-key", "api-key-file", "health-interval", "probe-timeout", "state-dir", "thinking", "compaction",
    "high-watermark", "low-watermark", "max-body", "max-sessions", "keepalive", "max-inflight", "max-queue",
    "queue-timeout", "upstream-timeout", "generation-timeout", "max-messages", "count-timeout",
    "compaction-timeout", "prefill-report"};
constexpr UpOptionInfo kServeOnly[] = {
    {"upstream", "the server to put the gateway in front of: http://HOST:PORT of a llama-server (mainline or ik_llama.cpp)"},
    {"upstream-key", "the API key that server wants (its --api-key)"},
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

Result<ListenAddress> parse_listen(std::string_view text) {
  ListenAddress a;
  std::string port_text(text);
  const size_t colon = text.rfind(':');
  if (colon != std::string_view::npos) {
    a.host = std::string(text.substr(0, colon));
    port_text = std::string(text.substr(colon + 1));
    if (a.host.size() >= 2 && a.host.front() == '[' && a.host.back() == ']')
      a.host = a.host.substr(1, a.host.size() - 2);
  } else {
    a.host = "127.0.0.1";
  }
  if (a.host.empty()) return Error(fmt::format("--listen '{}': no host (use HOST:PORT)", text));
  auto port = number<uint32_t>("listen", port_text, 1, 65535);
  if (!port) return Error(fmt::format("--listen '{}': expected HOST:PORT with a port from 1 to 65535", text));
  a.port = static_cast<uint16_t>(*port);
  return a;
}

Result<engine::Millis> parse_duration(std::string_view text) {
  size_t i = 0;
  while (i < text.size() && ((text[i] >= '0' && text[i] <= '9') || text[i] == '.')) ++i;
  const std::string num(text.substr(0, i));
  const std::string unit(text.substr(i));
  double value = 0;
  auto [ptr, ec] = std::from_chars(num.data(), num.data() + num.size(), value);
  double scale = 0;
  if (unit == "ms")
    scale = 1;
  else if (unit == "s" || unit.empty())
    scale = 1000;
  else if (unit == "m" || unit == "min")
    scale = 60000;
  else if (unit == "h")
    scale = 3600000;
  if (num.empty() || ec != std::errc() || ptr != num.data() + num.size() || scale == 0 ||
      value * scale > 1e15) {
    return Error(fmt::format("'{}' is not a duration (e.g. 500ms, 10s, 5m, 1h)", text));
  }
  return engine::Millis(static_cast<int64_t>(std::llround(value * scale)));
}

// --api-key K1,K2 or --api-key-file FILE (one key per line; blank lines and # comments skipped).
static Status add_api_keys(const std::string& name, const std::string& value, UpConfig& c) {
  std::vector<std::string> keys;
  if (name == "api-key") {
    std::stringstream in(value);
    for (std::string k; std::getline(in, k, ',');) keys.push_back(k);
  } else {
    std::ifstream in(value);
    if (!in) return Error(fmt::format("--api-key-file: cannot read '{}'", value));
    for (std::string line; std::getline(in, line);) {
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
      if (line.empty() || line[0] == '#') continue;
      keys.push_back(line);
    }
    if (keys.empty()) return Error(fmt::format("--api-key-file: '{}' holds no key", value));
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

Result<UpConfig> resolve_up_options(const UpOptions& options) {
  UpConfig c;
  c.model = options.model;
  plan::ServerSettings& s = c.settings;
  for (const auto& entry : options.values) {
    const std::string& name = entry.first;  // plain references: lambdas below capture them
    const std::string& v = entry.second;
    auto duration = [&](engine::Millis& out) -> Status {
      auto d = parse_duration(v);
      if (!d) return Error(fmt::format("--{}: {}", name, d.error().message()));
      if (d->count() <= 0) return Error(fmt::format("--{}: must be positive", name));
      out = *d;
      return {};
    };
    auto u32 = [&](uint32_t min = 0) {
      return number<uint32_t>(name, v, min, std::numeric_limits<uint32_t>::max());
    };
    if (name == "listen") {
      KV_ASSIGN_OR_RETURN(c.listen, parse_listen(v));
    } else if (name == "api-key" || name == "api-key-file") {
      KV_TRY(add_api_keys(name, v, c));
    } else if (name == "server") {
      c.server = v;
    } else if (name == "ctx") {
      auto t = util::parse_tokens(v);
      if (!t || *t == 0 || *t > std::numeric_limits<uint32_t>::max()) {
        return Error(fmt::format("--ctx '{}': expected a token count such as 4096 or 64k", v));
      }
      s.ctx = static_cast<uint32_t>(*t);
    } else if (name == "ctk") {
      s.cache_type_k = v;
      if (!options.values.count("ctv")) s.cache_type_v = v;
    } else if (name == "ctv") {
      s.cache_type_v = v;
    } else if (name == "parallel") {
      KV_ASSIGN_OR_RETURN(s.parallel, u32(1));
    } else if (name == "batch") {
      KV_ASSIGN_OR_RETURN(s.batch, u32(1));
    } else if (name == "ubatch") {
      KV_ASSIGN_OR_RETURN(s.ubatch, u32(1));
    } else if (name == "ngl") {
      if (v == "all") {
        c.n_gpu_layers = -1;
      } else {
        KV_ASSIGN_OR_RETURN(c.n_gpu_layers, number<int32_t>(name, v, -1, 100000));
      }
    } else if (name == "memory" || name == "reserve") {
      auto b = util::parse_bytes(v);
      if (!b) return Error(fmt::format("--{} '{}': {}", name, v, b.error().message()));
      if (name == "memory")
        c.memory_budget = *b;
      else
        c.reserve = *b;
    } else if (name == "flash-attn") {
      if (v == "on")
        s.flash_attn = plan::FlashAttn::kOn;
      else if (v == "off")
        s.flash_attn = plan::FlashAttn::kOff;
      else if (v == "auto")
        s.flash_attn = plan::FlashAttn::kAuto;
      else
        return Error(fmt::format("--flash-attn '{}': expected on, off or auto", v));
    } else if (name == "cache-ram") {
      auto b = util::parse_bytes(v);  // a bare number is MiB, like the engine's -cram
      if (!b) return Error(fmt::format("--cache-ram '{}': {}", v, b.error().message()));
      s.cache_ram_mib = *b / util::kMiB;
    } else if (name == "cache-reuse") {
      KV_ASSIGN_OR_RETURN(s.cache_reuse, u32());
    } else if (name == "cache-ram-similarity") {
      double d = 0;
      auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), d);
      if (ec != std::errc() || ptr != v.data() + v.size() || d < 0 || d > 1) {
        return Error(fmt::format("--cache-ram-similarity '{}': expected a fraction from 0 to 1", v));
      }
      s.cache_ram_similarity = d;
    } else if (name == "cache-ram-n-min") {
      KV_ASSIGN_OR_RETURN(s.cache_ram_n_min, u32());
    } else if (name == "ctx-checkpoints") {
      KV_ASSIGN_OR_RETURN(s.ctx_checkpoints, u32());
    } else if (name == "ctx-checkpoint-tolerance") {
      KV_ASSIGN_OR_RETURN(s.ctx_checkpoint_tolerance, u32());
    } else if (name == "context-shift") {
      KV_ASSIGN_OR_RETURN(s.context_shift, on_off(name, v));
    } else if (name == "kvu" || name == "no-kvu") {
      KV_ASSIGN_OR_RETURN(const bool on, on_off(name, v));
      if (on) {
        if (s.kv_unified && *s.kv_unified != (name == "kvu"))
          return Error("--kvu and --no-kvu contradict each other");
        s.kv_unified = name == "kvu";
      }
    } else if (name == "swa-full") {
      KV_ASSIGN_OR_RETURN(s.swa_full, on_off(name, v));
    } else if (name == "jinja") {
      KV_ASSIGN_OR_RETURN(s.jinja, on_off(name, v));
    } else if (name == "timeout") {
      KV_ASSIGN_OR_RETURN(s.timeout_s, u32(1));
    } else if (name == "threads") {
      KV_ASSIGN_OR_RETURN(s.threads, u32(1));
    } else if (name == "mla") {
      KV_ASSIGN_OR_RETURN(s.mla, number<int32_t>(name, v, 0, 3));
    } else if (name == "alias") {
      s.alias = v;
    } else if (name == "on-mismatch") {
      if (v == "fail")
        c.on_mismatch = engine::OnMismatch::kFail;
      else if (v == "warn")
        c.on_mismatch = engine::OnMismatch::kWarn;
      else
        return Error(fmt::format("--on-mismatch '{}': expected fail or warn", v));
    } else if (name == "log-dir") {
      c.log_dir = v;
    } else if (name == "log-max-size") {
      auto b = util::parse_bytes(v);
      if (!b || *b < 4096)
        return Error(fmt::format("--log-max-size '{}': expected a size of at least 4KiB", v));
      c.log_max_bytes = *b;
    } else if (name == "log-keep") {
      KV_ASSIGN_OR_RETURN(c.log_keep, number<int>(name, v, 0, 1000));
    } else if (name == "state-dir") {
      c.state_dir = v;
    } else if (name == "prefill-report") {
      c.prefill_report = v;
    } else if (name == "upstream") {
      c.upstream = v;
    } else if (name == "upstream-key") {
      c.upstream_key = v;
    } else if (name == "kv-disk") {
      auto b = util::parse_bytes(v);
      if (!b) return Error(fmt::format("--kv-disk '{}': {}", v, b.error().message()));
      c.kv_disk = *b;
    } else if (name == "kv-save-every") {
      auto t = util::parse_tokens(v);
      if (!t || *t == 0) return Error(fmt::format("--kv-save-every '{}': expected tokens (e.g. 4k)", v));
      c.kv_save_every = *t;
    } else if (name == "thinking") {
      KV_ASSIGN_OR_RETURN(c.thinking, on_off(name, v));
    } else if (name == "compaction") {
      KV_ASSIGN_OR_RETURN(c.compaction, on_off(name, v));
    } else if (name == "high-watermark" || name == "low-watermark") {
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
      (name == "high-watermark" ? c.high_watermark : c.low_watermark) = w;
    } else if (name == "max-body") {
      auto b = util::parse_bytes(v);
      if (!b || *b < 1024) return Error(fmt::format("--max-body '{}': expected a size of at least 1KiB", v));
      c.max_body_bytes = *b;
    } else if (name == "max-sessions") {
      KV_ASSIGN_OR_RETURN(c.max_sessions, number<uint32_t>(name, v, 1, 10000000));
    } else if (name == "keepalive") {
      KV_TRY(duration(c.keepalive));
    } else if (name == "max-inflight") {
      KV_ASSIGN_OR_RETURN(c.max_inflight, number<uint32_t>(name, v, 1, 100000));
    } else if (name == "max-queue") {
      KV_ASSIGN_OR_RETURN(c.max_queue, number<uint32_t>(name, v, 0, 1000000));
    } else if (name == "queue-timeout") {
      KV_TRY(duration(c.queue_timeout));
    } else if (name == "upstream-timeout") {
      KV_TRY(duration(c.upstream_timeout));
    } else if (name == "generation-timeout") {
      KV_TRY(duration(c.generation_timeout));
    } else if (name == "max-messages") {
      KV_ASSIGN_OR_RETURN(c.max_messages, number<uint32_t>(name, v, 1, 1000000));
    } else if (name == "count-timeout") {
      KV_TRY(duration(c.count_timeout));
    } else if (name == "compaction-timeout") {
      KV_TRY(duration(c.compaction_timeout));
    } else if (name == "health-interval") {
      KV_TRY(duration(c.timing.health_interval));
    } else if (name == "probe-timeout") {
      KV_TRY(duration(c.timing.probe_timeout));
    } else if (name == "start-timeout") {
      KV_TRY(duration(c.timing.start_timeout));
    } else if (name == "ready-timeout") {
      KV_TRY(duration(c.timing.ready_timeout));
    } else if (name == "stop-grace") {
      KV_TRY(duration(c.timing.stop_grace));
    } else if (name == "zombie-after") {
      KV_ASSIGN_OR_RETURN(c.restart.zombie_after, number<int>(name, v, 1, 1000));
    } else if (name == "backoff") {
      KV_TRY(duration(c.restart.backoff_initial));
    } else if (name == "backoff-max") {
      KV_TRY(duration(c.restart.backoff_max));
    } else if (name == "max-failed-starts") {
      KV_ASSIGN_OR_RETURN(c.restart.max_failed_starts, number<int>(name, v, 0, 1000000));
    } else {
      return Error(fmt::format("unknown option --{}", name));
    }
  }
  if (c.restart.backoff_max < c.restart.backoff_initial) c.restart.backoff_max = c.restart.backoff_initial;
  return c;
}

}  // namespace kvgate::cli
