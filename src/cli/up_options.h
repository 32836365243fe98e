// The options of `kvgate up`, shared with `kvgate unit` (which writes them into a service
// file). Every option may also come from a JSON config file (--config FILE): an object whose
// keys are the option names without the leading dashes ("ctx", "cache-ram" or "cache_ram",
// ...; "model" for the positional model), with strings, numbers or booleans (true/false for
// on/off options). The command line wins over the file; unknown keys are errors.
//
// Values are kept as given (strings) until resolve_up_options() checks and converts them,
// so errors name the option and `kvgate unit` can write them back unchanged. The spellings
// follow `kvgate plan` (--ctx 64k, --ngl all, --kvu/--no-kvu, --swa-full, --cache-ram SIZE,
// --ctv defaulting to the K type) so a planned configuration can be started as is.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "engine/live_verifier.h"
#include "engine/supervisor.h"
#include "plan/server_settings.h"
#include "util/result.h"

namespace kvgate::cli {

struct UpConfig;

// One option: its name, how its value is read and where it goes, and its help.
struct UpOptionInfo {
  std::string_view name;  // without "--"; also the config file key
  // Checks the value as given (errors name the option) and stores it in the config.
  Status (*read)(const std::string& name, const std::string& value, UpConfig& config) = nullptr;
  std::string_view help;
  bool flag = false;         // takes no value (set = "on")
  std::string_view aliases;  // extra command-line spellings, comma-separated ("--np")
};
std::span<const UpOptionInfo> up_option_table();

struct UpOptions {
  std::optional<std::string> model;
  std::optional<std::string> config;
  std::map<std::string, std::string> values;  // option name → value as given
};

// Whose options: `kvgate up` (and `kvgate unit`) take the whole table; `kvgate serve` (the
// gateway in front of a server it did not start) the gateway's options only, --upstream and
// --upstream-key, and no model.
enum class OptionSet { kUp, kServe };

// Registers the model positional (up), --config and every option of the set on `app`.
void add_up_options(CLI::App& app, UpOptions& options, OptionSet set = OptionSet::kUp);

// The keys of an --api-key-file: one per line, trailing spaces dropped, blank lines and #
// comments skipped; an Error when it cannot be read or holds none.
Result<std::vector<std::string>> keys_in_file(const std::string& path);

// Fills the options the command line left unset from the JSON config file; keys outside the
// set are errors.
Status merge_config_file(const std::string& path, UpOptions& options, OptionSet set = OptionSet::kUp);
// The same for a JSON text (for tests); `origin` names it in errors.
Status merge_config_json(std::string_view json, std::string_view origin, UpOptions& options,
                         OptionSet set = OptionSet::kUp);

// The arguments after `kvgate up` that reproduce `options` (model first, then --config,
// then the options in table order).
std::vector<std::string> to_up_args(const UpOptions& options);

struct ListenAddress {
  std::string host;
  uint16_t port = 0;
};
// "HOST:PORT", "[IPv6]:PORT" or "PORT" (host 127.0.0.1).
Result<ListenAddress> parse_listen(std::string_view text);
// "250ms", "10s", "5m", "1h"; a bare number is seconds.
Result<engine::Millis> parse_duration(std::string_view text);
// --allow-host's value: host names separated by commas, or "*" (http/host_allow.h).
Result<std::vector<std::string>> parse_allowed_hosts(std::string_view text);

// Checked and converted options. Engine settings not given keep plan::ServerSettings'
// defaults, except n_gpu_layers, which stays unset here (up picks all layers when the
// build can offload, else 0).
struct UpConfig {
  std::optional<std::string> model;
  ListenAddress listen{"127.0.0.1", 8787};
  std::optional<std::string> api_key;  // required from clients (the first of api_keys)
  // Every key clients may send (--api-key K1,K2,... and --api-key-file, one per line); each
  // is its own scope: its conversations are not reachable with another key.
  std::vector<std::string> api_keys;
  // Host names clients may use besides localhost, IP addresses and the listen address; "*":
  // any (--allow-host, http/host_allow.h).
  std::vector<std::string> allowed_hosts;
  std::optional<std::string> server;
  plan::ServerSettings settings;  // model_path and api_key are set by up
  bool stable_template = true;    // the model's template made prefix-stable (plan/chat_template.h)
  std::optional<int32_t> n_gpu_layers;
  std::optional<uint64_t> memory_budget;
  uint64_t reserve = 1024ull << 20;
  engine::OnMismatch on_mismatch = engine::OnMismatch::kFail;
  engine::SupervisorTiming timing;
  engine::RestartPolicy restart;
  std::optional<std::string> log_dir;
  uint64_t log_max_bytes = 20ull << 20;
  int log_keep = 5;
  // The gateway.
  std::optional<std::string> state_dir;  // "none": sessions in memory only
  std::optional<std::string> prefill_report;  // a bench prefill.json for the status page
  uint32_t engines = 1;                       // kvgate up: engines of the model side by side
  std::vector<std::string> engine_devices;    // and each one's CUDA_VISIBLE_DEVICES (empty: not set)
  std::optional<std::string> upstream;        // kvgate serve: the servers' URLs, comma-separated
  std::optional<std::string> upstream_key;    // and their key
  std::optional<std::string> routing;         // with several: "affinity" (default) or "round-robin"
  std::optional<std::string> conversation_header;  // sent to the upstream with each conversation's id
  std::optional<std::string> conversation_field;   // the body field that carries it (e.g. "user")
  // Conversations' saved engine state (kvstate/kv_keeper.h): the disk it may take (unset: a
  // share of the free space; 0: off) and the growth after which a turn saves (unset: measured).
  std::optional<uint64_t> kv_disk;
  std::optional<uint64_t> kv_save_every;
  bool thinking = false;
  bool compaction = true;
  struct Watermark {
    std::optional<uint64_t> tokens;
    std::optional<double> fraction;
  };
  std::optional<Watermark> high_watermark;  // tokens, or a fraction of the slot context
  std::optional<Watermark> low_watermark;   // tokens, or a fraction of the high watermark
  uint64_t max_body_bytes = 64ull << 20;
  uint32_t max_sessions = 1024;
  // sessions.db retention (GatewayOptions::session_retention_*): age (0: none) and count (0: none).
  engine::Millis session_retention{30LL * 24 * 3600 * 1000};
  uint32_t max_stored_sessions = 20000;
  engine::Millis keepalive{10000};
  // Admission and time-outs (gateway/admission.h, GatewayOptions).
  std::optional<uint32_t> max_inflight;  // default: the engine's slots
  uint32_t max_queue = 64;
  engine::Millis queue_timeout{120000};
  engine::Millis upstream_timeout{300000};
  engine::Millis generation_timeout{600000};
  // The output limit for a chat turn whose client set none (GatewayOptions); 0: none.
  uint32_t default_max_tokens = 16384;
  // Work per request (gateway/request_limits.h): messages per chat request, and time limits
  // on counting one prompt's tokens and on one compaction.
  uint32_t max_messages = 4096;
  engine::Millis count_timeout{30000};
  engine::Millis compaction_timeout{60000};
};
using Watermark = UpConfig::Watermark;
Result<UpConfig> resolve_up_options(const UpOptions& options);

}  // namespace kvgate::cli
