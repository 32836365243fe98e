// kvgate run: starts an agent CLI pointed at a running kvgate.
//
//   kvgate run claude                      Claude Code on the kvgate at 127.0.0.1:8787
//   kvgate run codex -- exec "fix the test"  Codex, with its own arguments after --
//   kvgate run opencode --url http://box:8787 --api-key-file ~/.kvgate-key
//   kvgate run qwen --print                the environment and command, not run
//
// kvgate is asked what it serves (GET /v1/models: the model id and the context per
// conversation); the agent gets them, the key, an output cap and its vendor traffic off
// (agent_launch.h), and replaces this process (its exit status is the command's).
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "cli/agent_launch.h"
#include "cli/args.h"
#include "cli/command.h"
#include "cli/up_options.h"
#include "engine/pinned.h"
#include "util/subprocess.h"

namespace kvgate::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kDefaultUrl = "http://127.0.0.1:8787";

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::optional<std::string>(v) : std::nullopt;
}

// GET /v1/models of the kvgate at `url`.
Result<ServerFacts> ask_kvgate(const std::string& url, const std::string& key) {
  httplib::Client c(url);
  c.set_connection_timeout(std::chrono::seconds(3));
  c.set_read_timeout(std::chrono::seconds(15));
  auto r = c.Get("/v1/models", {{"Authorization", "Bearer " + key}});
  if (!r) {
    return Error(
        fmt::format("no kvgate answers at {} ({}): start one with `kvgate up MODEL.gguf`, or name "
                    "another with --url",
                    url, httplib::to_string(r.error())));
  }
  if (r->status == 401) {
    return Error(
        fmt::format("the kvgate at {} wants an API key: --api-key-file FILE or KVGATE_API_KEY", url));
  }
  const json j = json::parse(r->body, nullptr, false);
  if (r->status != 200 || !j.is_object() || !j.contains("data") || !j["data"].is_array() ||
      j["data"].empty() || !j["data"][0].is_object() || !j["data"][0].contains("id") ||
      !j["data"][0]["id"].is_string()) {
    return Error(fmt::format("{}/v1/models answered {} without a model: is it a kvgate?", url, r->status));
  }
  ServerFacts s{.url = url, .key = key, .model = j["data"][0]["id"]};
  if (auto n = j["data"][0].find("max_model_len"); n != j["data"][0].end() && n->is_number_unsigned()) {
    s.context = n->get<uint64_t>();
  }
  return s;
}

// What would run, for --print: the variables (the key shown as <key>) and the command line.
void print_launch(const AgentLaunch& l, const std::string& program, const std::string& key) {
  for (const auto& [path, content] : l.files) fmt::print("# writes {}\n", path);
  for (const auto& [name, value] : l.env)
    fmt::print("{}={}\n", name, value == key ? "<key>" : util::shell_quote(value));
  for (const auto& [name, value] : l.defaults) {
    if (std::getenv(name.c_str()) == nullptr) fmt::print("{}={}\n", name, util::shell_quote(value));
  }
  std::vector<std::string> command = {program};
  command.insert(command.end(), l.args.begin(), l.args.end());
  fmt::print("{}\n", util::shell_command(command));
}

Status write_files(const AgentLaunch& l) {
  for (const auto& [path, content] : l.files) {
    std::error_code ec;
    fs::create_directories(fs::path(path).parent_path(), ec);
    std::ofstream out(path, std::ios::trunc);
    if (!(out << content)) return Error(fmt::format("cannot write {}", path));
  }
  return {};
}

struct RunArgs {
  std::string agent;
  std::string url;
  std::string key_file;
  std::string agent_bin;
  bool print = false;
};

}  // namespace

int run_run(int argc, char** argv) {
  // What follows "--" is the agent's.
  std::vector<std::string> agent_args;
  int own = argc;
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--") {
      own = i;
      agent_args.assign(argv + i + 1, argv + argc);
      break;
    }
  }
  RunArgs a;
  CLI::App app{
      fmt::format("Start an agent CLI ({}) pointed at a running kvgate: its model, key, context "
                  "window and output cap, its vendor traffic off. Arguments after -- go to the agent.",
                  fmt::join(agent_names(), ", ")),
      "kvgate run"};
  app.add_option("agent", a.agent, "the agent CLI")->required();
  app.add_option("--url", a.url, fmt::format("the kvgate to use (default $KVGATE_URL or {})", kDefaultUrl));
  app.add_option("--api-key-file", a.key_file,
                 "the key kvgate wants (default $KVGATE_API_KEY; none needed without)");
  app.add_option("--agent-bin", a.agent_bin, "the agent's program (default: its name on PATH)");
  app.add_flag("--print", a.print, "print the environment and command instead of running it");
  if (auto code = parse_args(app, own, argv)) return *code;

  std::string url = !a.url.empty() ? a.url : env("KVGATE_URL").value_or(kDefaultUrl);
  while (!url.empty() && url.back() == '/') url.pop_back();
  std::string key = env("KVGATE_API_KEY").value_or("kvgate");
  if (!a.key_file.empty()) {
    auto keys = keys_in_file(a.key_file);  // the format of kvgate up's --api-key-file: its first key
    if (!keys.ok())
      return (std::fprintf(stderr, "kvgate run: %s\n", keys.error().message().c_str()), kExitUsage);
    key = keys->front();
  }
  const std::string cache_dir = (engine::cache_root() / "run").string();
  auto facts = ask_kvgate(url, key);
  if (!facts.ok())
    return (std::fprintf(stderr, "kvgate run: %s\n", facts.error().message().c_str()), kExitFailure);
  auto launch = agent_launch(a.agent, *facts, cache_dir, std::move(agent_args));
  if (!launch.ok())
    return (std::fprintf(stderr, "kvgate run: %s\n", launch.error().message().c_str()), kExitUsage);
  const std::optional<std::string> program =
      a.agent_bin.empty() ? util::find_program(launch->program) : a.agent_bin;
  if (!program) {
    std::fprintf(stderr, "kvgate run: no `%s` on PATH: npm install -g %s (or give --agent-bin PATH)\n",
                 launch->program.c_str(), launch->package.c_str());
    return kExitFailure;
  }
  if (a.print) {
    print_launch(*launch, *program, key);
    return kExitOk;
  }
  if (auto written = write_files(*launch); !written.ok()) {
    std::fprintf(stderr, "kvgate run: %s\n", written.error().message().c_str());
    return kExitFailure;
  }
  for (const auto& [name, value] : launch->env) util::set_env(name, value, true);
  for (const auto& [name, value] : launch->defaults) util::set_env(name, value, false);
  std::fflush(stdout);
  const Error failed = util::exec_program(*program, launch->args);
  std::fprintf(stderr, "kvgate run: %s\n", failed.message().c_str());
  return kExitFailure;
}

}  // namespace kvgate::cli
