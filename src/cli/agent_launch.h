// kvgate run: how each agent CLI is started against a running kvgate, as a pure plan — the
// program, its arguments and the environment added to the caller's. Nothing of the user's own
// configuration is written: each CLI is pointed at kvgate through its environment or its
// command line (Claude Code's variables, Codex's `-c key=value` overrides, opencode's
// OPENCODE_CONFIG_CONTENT and Kilo's KILO_CONFIG_CONTENT) or through a file kvgate writes in
// its own cache and names on the command line or in a variable (a Qwen Code system settings
// file, a pi extension, a Continue configuration file). Keys stay out of those files: each
// names a variable the agent reads it from.
//
// Context: the agent is told the slot's real context window, so what it shows as "context
// left" is true, and its own auto-compaction is set to that whole window. kvgate compacts first
// (at its high watermark, keeping the engine's cached prefix), so the agent's own compaction —
// a summary that rewrites the history and makes the engine compute it all again — comes only
// when the agent's own count of its uncompacted history passes the window. pi's threshold is
// moved there by the extension (it has no setting outside its own settings files); Continue's
// CLI has none: it compacts at the window less its output cap and a buffer (agent_launch.cc).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/result.h"

namespace kvgate::cli {

// What kvgate answered about itself (GET /v1/models).
struct ServerFacts {
  std::string url;       // http://HOST:PORT, no trailing slash
  std::string key;       // what the agent sends as its API key
  std::string model;     // the id /v1/models lists
  uint64_t context = 0;  // tokens per conversation (max_model_len); 0: unknown, left to the agent
};

struct AgentLaunch {
  std::string program;                                   // looked up on PATH unless given
  std::string package;                                   // the npm package that installs it
  std::vector<std::string> args;                         // after the program; the user's last
  std::vector<std::pair<std::string, std::string>> env;  // set on top of the caller's
  // Set where the caller has not set them (the window, the output cap, vendor traffic): a
  // user's own export wins.
  std::vector<std::pair<std::string, std::string>> defaults;
  std::vector<std::pair<std::string, std::string>> files;  // written first: path, content
};

// The agents kvgate run knows, by the name it takes.
std::span<const std::string_view> agent_names();

// The most an agent is told to write in one answer: a quarter of the window (the prompt needs
// the rest), at most 16384 (kvgate's own default cap); 0 when the window is unknown.
uint64_t agent_output_cap(uint64_t context);

// The launch of `agent` against `server`; `cache_dir` is kvgate's folder for the files it
// writes (Qwen Code's settings, pi's extension, Continue's configuration). An unknown agent is an Error
// listing the known ones.
Result<AgentLaunch> agent_launch(std::string_view agent, const ServerFacts& server,
                                 const std::string& cache_dir, std::vector<std::string> user_args);

}  // namespace kvgate::cli
