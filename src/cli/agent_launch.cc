#include "cli/agent_launch.h"

#include <algorithm>
#include <array>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "util/json.h"

namespace kvgate::cli {

namespace {

using Env = std::vector<std::pair<std::string, std::string>>;

// A TOML basic string for Codex's -c overrides.
std::string toml_string(std::string_view s) { return util::json_text(nlohmann::json(std::string(s))); }

constexpr uint64_t kClaudeMinCompactWindow = 100000;

AgentLaunch claude(const ServerFacts& s, const std::string& /*cache_dir*/) {
  AgentLaunch l{.program = "claude", .package = "@anthropic-ai/claude-code"};
  l.env = {{"ANTHROPIC_BASE_URL", s.url},
           {"ANTHROPIC_API_KEY", s.key},
           {"ANTHROPIC_MODEL", s.model},
           {"ANTHROPIC_DEFAULT_OPUS_MODEL", s.model},
           {"ANTHROPIC_DEFAULT_SONNET_MODEL", s.model},
           {"ANTHROPIC_DEFAULT_HAIKU_MODEL", s.model},
           {"ANTHROPIC_SMALL_FAST_MODEL", s.model}};
  l.defaults = {{"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"},
                {"DISABLE_TELEMETRY", "1"},
                {"DISABLE_ERROR_REPORTING", "1"},
                {"DISABLE_AUTOUPDATER", "1"}};
  if (s.context > 0) {
    l.defaults.emplace_back("CLAUDE_CODE_MAX_CONTEXT_TOKENS", std::to_string(s.context));
    // Claude Code 2.1.332 reads a compaction window under 100k as 100k (and says so at every
    // start), then clamps it to the model's window: below 100k the window alone sets it.
    if (s.context >= kClaudeMinCompactWindow) {
      l.defaults.emplace_back("CLAUDE_CODE_AUTO_COMPACT_WINDOW", std::to_string(s.context));
    }
    l.defaults.emplace_back("CLAUDE_CODE_MAX_OUTPUT_TOKENS", std::to_string(agent_output_cap(s.context)));
  }
  return l;
}

AgentLaunch codex(const ServerFacts& s, const std::string& /*cache_dir*/) {
  AgentLaunch l{.program = "codex", .package = "@openai/codex"};
  l.env = {{"KVGATE_API_KEY", s.key}};
  const std::string provider =
      fmt::format(R"({{name="kvgate", base_url={}, wire_api="responses", env_key="KVGATE_API_KEY"}})",
                  toml_string(s.url + "/v1"));
  const std::vector<std::string> overrides = {
      "model_provider=\"kvgate\"",     "model_providers.kvgate=" + provider,
      "model=" + toml_string(s.model), "check_for_update_on_startup=false",
      "analytics.enabled=false",       "feedback.enabled=false"};
  for (const std::string& c : overrides) l.args.insert(l.args.end(), {"-c", c});
  if (s.context > 0) {
    l.args.insert(l.args.end(), {"-c", fmt::format("model_context_window={}", s.context), "-c",
                                 fmt::format("model_auto_compact_token_limit={}", s.context)});
  }
  return l;
}

// The configuration opencode and Kilo (a fork of it) merge over the user's own: one
// OpenAI-compatible provider (bundled in both), for the agent and its small model (titles,
// summaries), the key read from KVGATE_API_KEY.
nlohmann::json opencode_config(const ServerFacts& s) {
  nlohmann::json model = {{"name", s.model}};
  if (s.context > 0) model["limit"] = {{"context", s.context}, {"output", agent_output_cap(s.context)}};
  return {{"provider",
           {{"kvgate",
             {{"npm", "@ai-sdk/openai-compatible"},
              {"name", "kvgate"},
              {"options", {{"baseURL", s.url + "/v1"}, {"apiKey", "{env:KVGATE_API_KEY}"}}},
              {"models", {{s.model, model}}}}}}},
          {"model", "kvgate/" + s.model},
          {"small_model", "kvgate/" + s.model},
          {"autoupdate", false},
          {"share", "disabled"}};
}

AgentLaunch opencode(const ServerFacts& s, const std::string& /*cache_dir*/) {
  AgentLaunch l{.program = "opencode", .package = "opencode-ai"};
  l.env = {{"KVGATE_API_KEY", s.key}, {"OPENCODE_CONFIG_CONTENT", util::json_text(opencode_config(s))}};
  l.defaults = {{"OPENCODE_DISABLE_AUTOUPDATE", "1"},
                {"OPENCODE_DISABLE_MODELS_FETCH", "1"},
                {"OPENCODE_DISABLE_SHARE", "1"}};
  return l;
}

AgentLaunch kilo(const ServerFacts& s, const std::string& /*cache_dir*/) {
  AgentLaunch l{.program = "kilo", .package = "@kilocode/cli"};
  l.env = {{"KVGATE_API_KEY", s.key}, {"KILO_CONFIG_CONTENT", util::json_text(opencode_config(s))}};
  // Its telemetry, update check, model catalogue, sharing, conversation upload and presence calls.
  l.defaults = {{"KILO_TELEMETRY_LEVEL", "off"},      {"KILO_DISABLE_AUTOUPDATE", "1"},
                {"KILO_DISABLE_MODELS_FETCH", "1"},   {"KILO_DISABLE_SHARE", "1"},
                {"KILO_DISABLE_SESSION_INGEST", "1"}, {"KILO_DISABLE_PRESENCE", "1"}};
  return l;
}

AgentLaunch qwen(const ServerFacts& s, const std::string& cache_dir) {
  AgentLaunch l{.program = "qwen", .package = "@qwen-code/qwen-code"};
  l.env = {{"OPENAI_BASE_URL", s.url + "/v1"}, {"OPENAI_API_KEY", s.key}, {"OPENAI_MODEL", s.model}};
  // The window and the output cap are settings only: a system settings file of kvgate's own
  // (it takes precedence over the user's files, which stay as they are).
  nlohmann::json generation = nlohmann::json::object();
  if (s.context > 0) {
    generation = {{"contextWindowSize", s.context},
                  {"samplingParams", {{"max_tokens", agent_output_cap(s.context)}}}};
  }
  const nlohmann::json settings = {{"security", {{"auth", {{"selectedType", "openai"}}}}},
                                   {"model", {{"name", s.model}, {"generationConfig", generation}}},
                                   {"privacy", {{"usageStatisticsEnabled", false}}},
                                   {"telemetry", {{"enabled", false}}},
                                   {"general", {{"enableAutoUpdate", false}}}};
  const std::string path = cache_dir + "/qwen-settings.json";
  l.files = {{path, util::json_text(settings, 2) + "\n"}};
  l.env.emplace_back("QWEN_CODE_SYSTEM_SETTINGS_PATH", path);
  return l;
}

// pi reads providers from its own models file, or from an extension: kvgate writes one in its
// cache and names it with -e. Without settings of its own, pi compacts when its count passes
// the window less 16384 (its compaction.reserveTokens), half of a 32K window; the extension
// cancels a compaction asked with no instructions (pi's automatic ones, and a bare /compact)
// below the whole window.
AgentLaunch pi(const ServerFacts& s, const std::string& cache_dir) {
  AgentLaunch l{.program = "pi", .package = "@mariozechner/pi-coding-agent"};
  nlohmann::json model = {{"id", s.model},
                          {"name", s.model},
                          {"reasoning", false},
                          {"input", {"text"}},
                          {"cost", {{"input", 0}, {"output", 0}, {"cacheRead", 0}, {"cacheWrite", 0}}}};
  if (s.context > 0) {
    model["contextWindow"] = s.context;
    model["maxTokens"] = agent_output_cap(s.context);
  }
  // apiKey names the variable pi reads the key from; the system prompt as a system message.
  const nlohmann::json provider = {
      {"name", "kvgate"},
      {"baseUrl", s.url + "/v1"},
      {"apiKey", "KVGATE_API_KEY"},
      {"api", "openai-completions"},
      {"compat", {{"supportsDeveloperRole", false}, {"supportsReasoningEffort", false}}},
      {"models", {model}}};
  std::string extension = fmt::format(
      "// Written by kvgate run: the kvgate at {} as pi's provider \"kvgate\".\n"
      "export default function (pi) {{\n  pi.registerProvider(\"kvgate\", {});\n",
      s.url, util::json_text(provider));
  if (s.context > 0) {
    extension += fmt::format(
        "  pi.on(\"session_before_compact\", async (event) => {{\n"
        "    if (event.customInstructions === undefined && event.preparation.tokensBefore <= {}) {{\n"
        "      return {{ cancel: true }};\n    }}\n  }});\n",
        s.context);
  }
  extension += "}\n";
  const std::string path = cache_dir + "/pi-kvgate.js";
  l.files = {{path, extension}};
  l.env = {{"KVGATE_API_KEY", s.key}};
  l.args = {"-e", path, "--provider", "kvgate", "--model", s.model};
  l.defaults = {{"PI_OFFLINE", "1"}, {"PI_SKIP_VERSION_CHECK", "1"}, {"PI_TELEMETRY", "0"}};
  return l;
}

// Continue's CLI takes one configuration file with --config (in place of the user's
// ~/.continue/config.yaml, which stays as it is): a file of kvgate's own in its cache, the key
// read from KVGATE_API_KEY through Continue's secrets syntax. JSON is YAML. Continue compacts
// when its count reaches the context less the output cap and a buffer (the larger of the cap
// and a fifth of the rest, at most 15000: @continuedev/cli 1.5.47), 16384 of a 32K window with the 8192 cap,
// and has no setting for it: with Continue its own compaction comes before kvgate's.
AgentLaunch cn(const ServerFacts& s, const std::string& cache_dir) {
  AgentLaunch l{.program = "cn", .package = "@continuedev/cli"};
  nlohmann::json model = {{"name", s.model},
                          {"provider", "openai"},
                          {"model", s.model},
                          {"apiBase", s.url + "/v1"},
                          {"apiKey", "${{ secrets.KVGATE_API_KEY }}"},
                          {"roles", {"chat", "edit", "apply"}}};
  if (s.context > 0) {
    model["defaultCompletionOptions"] = {{"contextLength", s.context},
                                         {"maxTokens", agent_output_cap(s.context)}};
  }
  const nlohmann::json config = {
      {"name", "kvgate"}, {"version", "1.0.0"}, {"schema", "v1"}, {"models", {model}}};
  const std::string path = cache_dir + "/continue-config.yaml";
  l.files = {{path, util::json_text(config, 2) + "\n"}};
  l.env = {{"KVGATE_API_KEY", s.key}};
  l.args = {"--config", path};
  l.defaults = {{"CONTINUE_CLI_ENABLE_TELEMETRY", "0"}, {"CONTINUE_METRICS_ENABLED", "0"}};
  return l;
}

// The agents by the name kvgate run takes, in that order; each launch is given kvgate's folder
// for the files it writes.
struct Agent {
  std::string_view name;
  AgentLaunch (*launch)(const ServerFacts&, const std::string&);
};
constexpr std::array<Agent, 7> kAgents = {{{"claude", claude},
                                           {"cn", cn},
                                           {"codex", codex},
                                           {"kilo", kilo},
                                           {"opencode", opencode},
                                           {"pi", pi},
                                           {"qwen", qwen}}};

// The names alone, for agent_names() and the error that lists them.
constexpr auto kAgentNames = [] {
  std::array<std::string_view, kAgents.size()> names{};
  for (size_t i = 0; i < kAgents.size(); ++i) names[i] = kAgents[i].name;
  return names;
}();

}  // namespace

std::span<const std::string_view> agent_names() { return kAgentNames; }

uint64_t agent_output_cap(uint64_t context) { return std::min<uint64_t>(context / 4, 16384); }

Result<AgentLaunch> agent_launch(std::string_view agent, const ServerFacts& server,
                                 const std::string& cache_dir, std::vector<std::string> user_args) {
  const auto known =
      std::find_if(kAgents.begin(), kAgents.end(), [&](const Agent& a) { return a.name == agent; });
  if (known == kAgents.end()) {
    return Error(fmt::format("unknown agent '{}': kvgate run knows {}", agent, fmt::join(kAgentNames, ", ")));
  }
  AgentLaunch l = known->launch(server, cache_dir);
  l.args.insert(l.args.end(), std::make_move_iterator(user_args.begin()),
                std::make_move_iterator(user_args.end()));
  return l;
}

}  // namespace kvgate::cli
