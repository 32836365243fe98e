#include "plan/launch_args.h"

#include <cmath>

#include <fmt/format.h>

#include "plan/engine_quirks.h"
#include "util/subprocess.h"

namespace kvgate::plan {
namespace {

class Builder {
 public:
  Builder(const ServerCaps& caps) : caps_(caps) {}  // NOLINT(implicit)

  void add(std::initializer_list<std::string> args) { args_.insert(args_.end(), args); }

  // Adds `flag value` if the build accepts the probe `probe` (same flag, a sample value).
  bool add_if(std::string_view probe, std::initializer_list<std::string> args) {
    if (!caps_.accepts(probe)) return false;
    add(args);
    return true;
  }

  Error cannot(std::string_view setting, std::string_view value, std::string_view probe,
               std::string_view fix) const {
    return Error(fmt::format("setting {} = {} cannot be expressed for {}: it rejects '{}' ({}); {}", setting,
                             value, caps_.describe(), probe, caps_.rejection(probe), fix));
  }

  std::vector<std::string> take() { return std::move(args_); }
  const ServerCaps& caps() const { return caps_; }

 private:
  const ServerCaps& caps_;
  std::vector<std::string> args_;
};

// "0.50" for two-decimal values (the spelling the seed deployments use), else the shortest form.
std::string format_fraction(double v) {
  if (std::abs(v * 100 - std::round(v * 100)) < 1e-9) return fmt::format("{:.2f}", v);
  return fmt::format("{}", v);
}

Status check_kv_type(const ServerCaps& caps, std::string_view setting, const std::string& type) {
  if (caps.accepts_kv_type(type)) return {};
  std::string list;
  for (const auto& t : caps.kv_types) list += (list.empty() ? "" : ", ") + t;
  return Error(fmt::format("setting {} = {} cannot be expressed for {}: its cache types are {}", setting,
                           type, caps.describe(), list));
}

// Always explicit: model, context, slots, GPU layers, KV types, batches.
Status add_shape(Builder& b, const ServerSettings& s, const ServerCaps& caps) {
  if (s.model_path.empty()) return Error("setting model_path is empty");
  b.add({"-m", s.model_path});
  if (s.ctx == 0)
    return Error(
        "setting ctx = 0: kvgate passes an explicit context size (0 would mean the model's training "
        "context)");
  if (s.parallel == 0) return Error("setting parallel = 0: give at least one slot");
  b.add({"-c", std::to_string(s.ctx), "-np", std::to_string(s.parallel)});
  if (s.n_gpu_layers < -1)
    return Error(fmt::format("setting n_gpu_layers = {}: use -1 (all) or a layer count", s.n_gpu_layers));
  if (s.n_gpu_layers == -1) {
    // "all" where the build has it; ik parses -ngl with stoi, and any count above the layer count means all.
    if (!b.add_if("-ngl all", {"-ngl", "all"})) b.add({"-ngl", "999"});
  } else {
    b.add({"-ngl", std::to_string(s.n_gpu_layers)});
  }
  KV_TRY(check_kv_type(caps, "cache_type_k", s.cache_type_k));
  KV_TRY(check_kv_type(caps, "cache_type_v", s.cache_type_v));
  KV_TRY(check_cache_pair(caps, s.cache_type_k, s.cache_type_v, s.flash_attn));
  b.add({"-ctk", s.cache_type_k, "-ctv", s.cache_type_v});
  b.add({"-b", std::to_string(s.batch), "-ub", std::to_string(s.ubatch)});
  return {};
}

// Flash attention, and one KV pool for all slots or one per slot.
Status add_attention(Builder& b, const ServerSettings& s, const ServerCaps& caps) {
  switch (s.flash_attn) {
    case FlashAttn::kOn:
      if (!b.add_if("-fa on", {"-fa", "on"}) && !b.add_if("-fa", {"-fa"})) {
        return b.cannot("flash_attn", "on", "-fa on", "leave flash attention at the build's default");
      }
      break;
    case FlashAttn::kOff:
      if (!b.add_if("-fa off", {"-fa", "off"}) && !b.add_if("-no-fa", {"-no-fa"})) {
        return b.cannot("flash_attn", "off", "-fa off", "leave flash attention at the build's default");
      }
      break;
    case FlashAttn::kAuto:
      b.add_if("-fa auto", {"-fa", "auto"});  // otherwise the build's default is its own choice
      break;
  }
  if (s.kv_unified) {
    if (*s.kv_unified) {
      if (!b.add_if("-kvu", {"-kvu"})) {
        return b.cannot("kv_unified", "true", "-kvu", "this build gives each slot its own context (n_ctx / parallel)");
      }
    } else if (!b.add_if("-no-kvu", {"-no-kvu"}) && caps.accepts("-kvu")) {
      return b.cannot("kv_unified", "false", "-no-kvu", "leave kv_unified unset");
    }
    // A build without -kvu at all never unifies: false needs no flag.
  }
  return {};
}

// The caches around the KV cache: sliding window, host prompt cache, chunk reuse, checkpoints.
Status add_caches(Builder& b, const ServerSettings& s, const ServerCaps& caps) {
  if (s.swa_full && !b.add_if("--swa-full", {"--swa-full"})) {
    return b.cannot("swa_full", "true", "--swa-full", "unset it (ik_llama.cpp keeps no separate SWA cache)");
  }
  if (s.cache_ram_mib && !b.add_if("-cram 0", {"-cram", std::to_string(*s.cache_ram_mib)})) {
    return b.cannot("cache_ram_mib", std::to_string(*s.cache_ram_mib), "-cram 0", "unset it");
  }
  if (s.cache_reuse && *s.cache_reuse > 0 &&
      !b.add_if("--cache-reuse 0", {"--cache-reuse", std::to_string(*s.cache_reuse)})) {
    const std::string ik_or_mainline = caps.fork == Fork::kIk ? "ik_llama.cpp" : "mainline llama.cpp";
    return b.cannot(
        "cache_reuse", std::to_string(*s.cache_reuse), "--cache-reuse 0",
        fmt::format("{} cannot shift cached chunks; unset cache_reuse (its host prompt cache is -cram/-crs)",
                    ik_or_mainline));
  }
  if (s.cache_ram_similarity && !b.add_if("-crs 0.50", {"-crs", format_fraction(*s.cache_ram_similarity)})) {
    return b.cannot("cache_ram_similarity", format_fraction(*s.cache_ram_similarity), "-crs 0.50",
                    "unset it (an ik_llama.cpp setting)");
  }
  if (s.cache_ram_n_min && !b.add_if("-cram-n-min 0", {"-cram-n-min", std::to_string(*s.cache_ram_n_min)})) {
    return b.cannot("cache_ram_n_min", std::to_string(*s.cache_ram_n_min), "-cram-n-min 0",
                    "unset it (an ik_llama.cpp setting)");
  }
  if (s.ctx_checkpoints &&
      !b.add_if("--ctx-checkpoints 8", {"--ctx-checkpoints", std::to_string(*s.ctx_checkpoints)})) {
    return b.cannot("ctx_checkpoints", std::to_string(*s.ctx_checkpoints), "--ctx-checkpoints 8", "unset it");
  }
  if (s.ctx_checkpoint_tolerance &&
      !b.add_if("-ctx-ckpt-t 8", {"-ctx-ckpt-t", std::to_string(*s.ctx_checkpoint_tolerance)})) {
    return b.cannot("ctx_checkpoint_tolerance", std::to_string(*s.ctx_checkpoint_tolerance), "-ctx-ckpt-t 8",
                    "unset it (an ik_llama.cpp setting)");
  }
  return {};
}

// How the server runs: context shift, time-out, threads, MLA, templates, metrics, its name.
Status add_server(Builder& b, const ServerSettings& s) {
  if (s.context_shift) {
    if (!b.add_if("--context-shift on", {"--context-shift", "on"}) &&
        !b.add_if("--context-shift", {"--context-shift"})) {
      return b.cannot("context_shift", "on", "--context-shift", "turn context shift off");
    }
  } else if (!b.add_if("--context-shift off", {"--context-shift", "off"}) &&
             !b.add_if("--no-context-shift", {"--no-context-shift"})) {
    // ik's default is on (it silently truncates long prompts), so "off" must be explicit.
    return b.cannot("context_shift", "off", "--no-context-shift", "this build may truncate prompts silently");
  }
  if (!b.add_if("-to 600", {"-to", std::to_string(s.timeout_s)})) {
    return b.cannot("timeout_s", std::to_string(s.timeout_s), "-to 600", "this build has no server time-out flag");
  }
  if (s.threads && !b.add_if("-t 2", {"-t", std::to_string(*s.threads)})) {
    return b.cannot("threads", std::to_string(*s.threads), "-t 2", "unset it");
  }
  if (s.mla && !b.add_if("-mla 3", {"-mla", std::to_string(*s.mla)})) {
    return b.cannot("mla", std::to_string(*s.mla), "-mla 3", "unset it (an ik_llama.cpp setting)");
  }
  if (s.jinja) {
    if (!b.add_if("--jinja", {"--jinja"})) return b.cannot("jinja", "true", "--jinja", "tool calls need jinja templates");
  } else {
    b.add_if("--no-jinja", {"--no-jinja"});  // builds without --no-jinja default to off
  }
  if (s.chat_template_file) {
    // Both forks list it (no flag probe: its value is a file the probe would have to write).
    if (!s.jinja || !b.caps().help_flags.count("--chat-template-file")) {
      return Error(
          fmt::format("setting chat_template_file cannot be expressed for {}: {}; start it with the "
                      "model's own template (--stable-template off)",
                      b.caps().describe(),
                      s.jinja ? "its --help lists no --chat-template-file" : "jinja templates are off"));
    }
    b.add({"--chat-template-file", *s.chat_template_file});
  }
  if (s.metrics && !b.add_if("--metrics", {"--metrics"})) {
    return b.cannot("metrics", "true", "--metrics", "turn metrics off");
  }
  if (s.alias && !b.add_if("-a kvgate-probe", {"-a", *s.alias})) {
    return b.cannot("alias", *s.alias, "-a kvgate-probe", "unset it");
  }
  return {};
}

// Saved slot states and the API key.
Status add_state_and_key(Builder& b, const ServerSettings& s, const ServerCaps& caps) {
  if (s.slot_save_path) {
    // Both forks list it (no flag probe: its value is a folder the probe would have to create).
    if (!caps.help_flags.count("--slot-save-path")) {
      return Error(fmt::format("setting slot_save_path cannot be expressed for {}: its --help lists no "
                               "--slot-save-path; turn saved conversation states off (--kv-disk 0)",
                               caps.describe()));
    }
    b.add({"--slot-save-path", *s.slot_save_path});
  }
  // The key file keeps the key off the command line; builds without it get the key itself.
  const bool key_file = s.api_key_file && b.add_if("--api-key-file /dev/null", {"--api-key-file", *s.api_key_file});
  if (!key_file && s.api_key && !b.add_if("--api-key kvgate-probe", {"--api-key", *s.api_key})) {
    return b.cannot("api_key", "(set)", "--api-key kvgate-probe", "this build cannot be protected by a key");
  }
  return {};
}

// The log the startup check reads, and the start exactly as planned.
void add_logging(Builder& b, const ServerCaps& caps) {
  // Mainline hides its allocation lines below -lv 4; ik prints them unconditionally.
  b.add_if("-lv 4", {"-lv", "4"});
  // ik also writes its log to ./llama.log (mode 0644, in whatever directory kvgate runs in);
  // its --log-disable stops only that file (stderr keeps every line). Mainline's would
  // silence the log the startup check reads.
  if (caps.fork == Fork::kIk) b.add_if("--log-disable", {"--log-disable"});
  // Mainline's -fit adjusts unset values only; off keeps the start exactly as planned.
  b.add_if("-fit off", {"-fit", "off"});
}

}  // namespace

Result<std::vector<std::string>> launch_args(const ServerSettings& s, const ServerCaps& caps) {
  Builder b(caps);
  KV_TRY(add_shape(b, s, caps));
  KV_TRY(add_attention(b, s, caps));
  KV_TRY(add_caches(b, s, caps));
  KV_TRY(add_server(b, s));
  KV_TRY(add_state_and_key(b, s, caps));
  add_logging(b, caps);
  return b.take();
}

std::string redacted_command_line(const std::vector<std::string>& argv) {
  std::string out;
  for (size_t i = 0; i < argv.size(); ++i) {
    const bool secret = i > 0 && argv[i - 1] == "--api-key";
    if (!out.empty()) out += ' ';
    if (secret) {
      out += "***";
      continue;
    }
    out += util::shell_quote(argv[i]);
  }
  return out;
}

}  // namespace kvgate::plan
