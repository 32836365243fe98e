// kvgate run: each agent's launch plan (pure), and the command against a real kvgate gateway
// (its own /v1/models; no engine is asked), with `env` or `echo` standing in for the agent (on
// Windows a .cmd file, the shape npm installs an agent CLI in).
#include "cli/agent_launch.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "testing/cli_test_support.h"
#include "testing/gateway_e2e.h"
#include "testing/scripted_upstream.h"

namespace kvgate::cli {
namespace {

using nlohmann::json;

const ServerFacts kServer{
    .url = "http://127.0.0.1:8787", .key = "k-123", .model = "qwen3-8b", .context = 32768};

// The environment the agent gets from a caller that set none of it.
std::map<std::string, std::string> env_of(const AgentLaunch& l) {
  std::map<std::string, std::string> e(l.defaults.begin(), l.defaults.end());
  for (const auto& [name, value] : l.env) e[name] = value;
  return e;
}

TEST(AgentLaunchTest, ClaudeCodeIsPointedAtKvgateByItsEnvironment) {
  auto l = agent_launch("claude", kServer, "/c", {"-p", "hello"});
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->program, "claude");
  EXPECT_EQ(l->args, (std::vector<std::string>{"-p", "hello"}));
  auto e = env_of(*l);
  EXPECT_EQ(e["ANTHROPIC_BASE_URL"], "http://127.0.0.1:8787");  // Claude Code adds /v1/messages
  EXPECT_EQ(e["ANTHROPIC_API_KEY"], "k-123");
  EXPECT_EQ(e["ANTHROPIC_MODEL"], "qwen3-8b");
  EXPECT_EQ(e["ANTHROPIC_SMALL_FAST_MODEL"], "qwen3-8b");
  EXPECT_EQ(e["CLAUDE_CODE_MAX_CONTEXT_TOKENS"], "32768");
  // Under 100k Claude Code reads its compaction window as 100k and warns; the model's window
  // (the context) bounds it instead.
  EXPECT_EQ(e.count("CLAUDE_CODE_AUTO_COMPACT_WINDOW"), 0u);
  EXPECT_EQ(e["CLAUDE_CODE_MAX_OUTPUT_TOKENS"], "8192");
  EXPECT_EQ(e["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"], "1");
  EXPECT_TRUE(l->files.empty());
}

TEST(AgentLaunchTest, ClaudeCodesCompactionWindowIsSetFrom100kTokens) {
  ServerFacts s = kServer;
  s.context = 131072;
  auto l = agent_launch("claude", s, "/c", {});
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(env_of(*l)["CLAUDE_CODE_AUTO_COMPACT_WINDOW"], "131072");
  EXPECT_EQ(env_of(*l)["CLAUDE_CODE_MAX_OUTPUT_TOKENS"], "16384");
  s.context = 99999;
  l = agent_launch("claude", s, "/c", {});
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(env_of(*l).count("CLAUDE_CODE_AUTO_COMPACT_WINDOW"), 0u);
  EXPECT_EQ(env_of(*l)["CLAUDE_CODE_MAX_CONTEXT_TOKENS"], "99999");
}

TEST(AgentLaunchTest, CodexGetsItsProviderAsOverridesBeforeTheUsersArguments) {
  ServerFacts s = kServer;
  s.model = "a \"quoted\" name";
  auto l = agent_launch("codex", s, "/c", {"exec", "fix it"});
  ASSERT_TRUE(l.ok());
  ASSERT_GE(l->args.size(), 2u);
  EXPECT_EQ(std::vector<std::string>(l->args.end() - 2, l->args.end()),
            (std::vector<std::string>{"exec", "fix it"}));
  std::vector<std::string> overrides;
  for (size_t i = 0; i + 1 < l->args.size(); ++i) {
    if (l->args[i] == "-c") overrides.push_back(l->args[i + 1]);
  }
  auto has = [&](const std::string& o) {
    return std::find(overrides.begin(), overrides.end(), o) != overrides.end();
  };
  EXPECT_TRUE(has("model_provider=\"kvgate\""));
  EXPECT_TRUE(has(R"(model="a \"quoted\" name")"));
  EXPECT_TRUE(has(
      R"(model_providers.kvgate={name="kvgate", base_url="http://127.0.0.1:8787/v1", wire_api="responses", env_key="KVGATE_API_KEY"})"));
  EXPECT_TRUE(has("model_context_window=32768"));
  EXPECT_TRUE(has("model_auto_compact_token_limit=32768"));
  EXPECT_EQ(env_of(*l)["KVGATE_API_KEY"], "k-123");
}

TEST(AgentLaunchTest, OpencodeGetsAProviderMergedOverItsOwnConfiguration) {
  auto l = agent_launch("opencode", kServer, "/c", {"run", "hi"});
  ASSERT_TRUE(l.ok());
  auto e = env_of(*l);
  const json config = json::parse(e["OPENCODE_CONFIG_CONTENT"]);
  EXPECT_EQ(config["model"], "kvgate/qwen3-8b");
  EXPECT_EQ(config["small_model"], "kvgate/qwen3-8b");
  const json& provider = config["provider"]["kvgate"];
  EXPECT_EQ(provider["options"]["baseURL"], "http://127.0.0.1:8787/v1");
  EXPECT_EQ(provider["options"]["apiKey"], "{env:KVGATE_API_KEY}");  // the key stays out of the config
  EXPECT_EQ(provider["models"]["qwen3-8b"]["limit"]["context"], 32768);
  EXPECT_EQ(provider["models"]["qwen3-8b"]["limit"]["output"], 8192);
  EXPECT_EQ(e["KVGATE_API_KEY"], "k-123");
  EXPECT_EQ(l->args, (std::vector<std::string>{"run", "hi"}));
}

TEST(AgentLaunchTest, QwenCodeGetsASettingsFileOfKvgatesOwn) {
  auto l = agent_launch("qwen", kServer, "/cache/kvgate/run", {});
  ASSERT_TRUE(l.ok());
  auto e = env_of(*l);
  EXPECT_EQ(e["OPENAI_BASE_URL"], "http://127.0.0.1:8787/v1");
  EXPECT_EQ(e["OPENAI_MODEL"], "qwen3-8b");
  ASSERT_EQ(l->files.size(), 1u);
  EXPECT_EQ(l->files[0].first, "/cache/kvgate/run/qwen-settings.json");
  EXPECT_EQ(e["QWEN_CODE_SYSTEM_SETTINGS_PATH"], l->files[0].first);
  const json settings = json::parse(l->files[0].second);
  EXPECT_EQ(settings["model"]["generationConfig"]["contextWindowSize"], 32768);
  EXPECT_EQ(settings["model"]["generationConfig"]["samplingParams"]["max_tokens"], 8192);
  EXPECT_EQ(settings["security"]["auth"]["selectedType"], "openai");
  EXPECT_EQ(l->files[0].second.find("k-123"), std::string::npos) << "the key is not written to a file";
}

TEST(AgentLaunchTest, KiloGetsTheOpencodeProviderInItsOwnVariable) {
  auto l = agent_launch("kilo", kServer, "/c", {"run", "--continue", "hi"});
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->program, "kilo");
  EXPECT_EQ(l->package, "@kilocode/cli");
  auto e = env_of(*l);
  EXPECT_EQ(e.count("OPENCODE_CONFIG_CONTENT"), 0u);
  const json config = json::parse(e["KILO_CONFIG_CONTENT"]);
  EXPECT_EQ(config["model"], "kvgate/qwen3-8b");
  EXPECT_EQ(config["provider"]["kvgate"]["options"]["baseURL"], "http://127.0.0.1:8787/v1");
  EXPECT_EQ(config["provider"]["kvgate"]["models"]["qwen3-8b"]["limit"]["context"], 32768);
  EXPECT_EQ(e["KVGATE_API_KEY"], "k-123");
  EXPECT_EQ(e["KILO_TELEMETRY_LEVEL"], "off");
  EXPECT_EQ(e["KILO_DISABLE_AUTOUPDATE"], "1");
  EXPECT_EQ(e["KILO_CONFIG_CONTENT"].find("k-123"), std::string::npos);
  EXPECT_EQ(l->args, (std::vector<std::string>{"run", "--continue", "hi"}));
  EXPECT_TRUE(l->files.empty());
}

TEST(AgentLaunchTest, PiLoadsAnExtensionOfKvgatesOwnThatRegistersTheProvider) {
  auto l = agent_launch("pi", kServer, "/cache/kvgate/run", {"-p", "hi", "-c"});
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->program, "pi");
  ASSERT_EQ(l->files.size(), 1u);
  const auto& [path, js] = l->files[0];
  EXPECT_EQ(path, "/cache/kvgate/run/pi-kvgate.js");
  EXPECT_EQ(l->args, (std::vector<std::string>{"-e", path, "--provider", "kvgate", "--model", "qwen3-8b",
                                               "-p", "hi", "-c"}));
  // The provider's configuration is the JSON argument of registerProvider.
  const size_t open = js.find("pi.registerProvider(\"kvgate\", ");
  ASSERT_NE(open, std::string::npos) << js;
  const size_t start = js.find('{', open);
  const size_t end = js.find(");\n", start);
  const json provider = json::parse(js.substr(start, end - start));
  EXPECT_EQ(provider["baseUrl"], "http://127.0.0.1:8787/v1");
  EXPECT_EQ(provider["api"], "openai-completions");
  EXPECT_EQ(provider["apiKey"], "KVGATE_API_KEY");  // the variable's name: the key is not in the file
  EXPECT_EQ(provider["models"][0]["id"], "qwen3-8b");
  EXPECT_EQ(provider["models"][0]["contextWindow"], 32768);
  EXPECT_EQ(provider["models"][0]["maxTokens"], 8192);
  EXPECT_EQ(js.find("k-123"), std::string::npos);
  // pi's own threshold (the window less 16384) is moved to the whole window.
  EXPECT_NE(js.find("session_before_compact"), std::string::npos) << js;
  EXPECT_NE(js.find("tokensBefore <= 32768"), std::string::npos) << js;
  auto e = env_of(*l);
  EXPECT_EQ(e["KVGATE_API_KEY"], "k-123");
  EXPECT_EQ(e["PI_OFFLINE"], "1");
  EXPECT_EQ(e["PI_TELEMETRY"], "0");
}

TEST(AgentLaunchTest, ContinueGetsAConfigurationFileOfKvgatesOwn) {
  auto l = agent_launch("cn", kServer, "/cache/kvgate/run", {"-p", "hi", "--resume"});
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->program, "cn");
  EXPECT_EQ(l->package, "@continuedev/cli");
  ASSERT_EQ(l->files.size(), 1u);
  EXPECT_EQ(l->files[0].first, "/cache/kvgate/run/continue-config.yaml");
  EXPECT_EQ(l->args, (std::vector<std::string>{"--config", l->files[0].first, "-p", "hi", "--resume"}));
  const json config = json::parse(l->files[0].second);  // JSON, which YAML readers take
  ASSERT_EQ(config["models"].size(), 1u);
  const json& m = config["models"][0];
  EXPECT_EQ(m["provider"], "openai");
  EXPECT_EQ(m["model"], "qwen3-8b");
  EXPECT_EQ(m["apiBase"], "http://127.0.0.1:8787/v1");
  EXPECT_EQ(m["apiKey"], "${{ secrets.KVGATE_API_KEY }}");
  EXPECT_EQ(m["defaultCompletionOptions"]["contextLength"], 32768);
  EXPECT_EQ(m["defaultCompletionOptions"]["maxTokens"], 8192);
  EXPECT_EQ(l->files[0].second.find("k-123"), std::string::npos);
  auto e = env_of(*l);
  EXPECT_EQ(e["KVGATE_API_KEY"], "k-123");
  EXPECT_EQ(e["CONTINUE_CLI_ENABLE_TELEMETRY"], "0");
}

TEST(AgentLaunchTest, AnUnknownWindowLeavesTheAgentsOwnAndUnknownAgentsAreNamed) {
  ServerFacts s = kServer;
  s.context = 0;
  auto claude = agent_launch("claude", s, "/c", {});
  ASSERT_TRUE(claude.ok());
  EXPECT_EQ(env_of(*claude).count("CLAUDE_CODE_MAX_CONTEXT_TOKENS"), 0u);
  EXPECT_EQ(env_of(*claude).count("CLAUDE_CODE_MAX_OUTPUT_TOKENS"), 0u);
  auto codex = agent_launch("codex", s, "/c", {});
  ASSERT_TRUE(codex.ok());
  EXPECT_EQ(std::count(codex->args.begin(), codex->args.end(), "model_context_window=0"), 0);
  auto pi = agent_launch("pi", s, "/c", {});
  ASSERT_TRUE(pi.ok());
  EXPECT_EQ(pi->files[0].second.find("contextWindow"), std::string::npos);
  EXPECT_EQ(pi->files[0].second.find("session_before_compact"), std::string::npos);
  auto cn = agent_launch("cn", s, "/c", {});
  ASSERT_TRUE(cn.ok());
  EXPECT_EQ(cn->files[0].second.find("contextLength"), std::string::npos);
  auto bad = agent_launch("cursor", kServer, "/c", {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("claude, cn, codex, kilo, opencode, pi, qwen"), std::string::npos)
      << bad.error().message();
  EXPECT_EQ(agent_output_cap(32768), 8192u);
  EXPECT_EQ(agent_output_cap(262144), 16384u);
  EXPECT_EQ(agent_output_cap(0), 0u);
}

// A real gateway serving Qwen3-8B with a 16K window behind the key "secret-key" (no engine is
// asked: `kvgate run` reads only /v1/models).
std::unique_ptr<testing::Front> served_front() {
  gateway::GatewayOptions o;
  o.context_tokens = 16384;
  o.model_name = "/models/Qwen3-8B-Q4_K_M.gguf";
  o.api_keys = {"secret-key"};
  return std::make_unique<testing::Front>(std::make_shared<testing::ScriptedUpstream>(16384), o);
}

// The command against a real gateway: it reads the model and window from /v1/models, and the
// agent (here `env`, which prints what it was given) runs in its place with them.
TEST(KvgateRunTest, TheAgentRunsWithWhatKvgateServes) {
#ifdef _WIN32
  GTEST_SKIP()
      << "/usr/bin/env and /bin/echo stand in for the agent: TheAgentIsACmdFileOnWindows is this test there";
#endif
  const auto front = served_front();
  const std::string url = "http://127.0.0.1:" + std::to_string(front->port());
  auto ran = testing::run_kvgate({"run", "claude", "--url", url, "--agent-bin", "/usr/bin/env"},
                                 {{"KVGATE_API_KEY", "secret-key"}});
  EXPECT_EQ(ran.code, 0) << ran.output;
  EXPECT_NE(ran.output.find("ANTHROPIC_BASE_URL=" + url + "\n"), std::string::npos) << ran.output;
  EXPECT_NE(ran.output.find("ANTHROPIC_MODEL=Qwen3-8B-Q4_K_M\n"), std::string::npos) << ran.output;
  EXPECT_NE(ran.output.find("CLAUDE_CODE_MAX_CONTEXT_TOKENS=16384\n"), std::string::npos) << ran.output;
  EXPECT_NE(ran.output.find("CLAUDE_CODE_MAX_OUTPUT_TOKENS=4096\n"), std::string::npos) << ran.output;
  // The caller's own output cap wins; where kvgate is stays kvgate's.
  ran = testing::run_kvgate({"run", "claude", "--url", url, "--agent-bin", "/usr/bin/env"},
                            {{"KVGATE_API_KEY", "secret-key"},
                             {"CLAUDE_CODE_MAX_OUTPUT_TOKENS", "512"},
                             {"ANTHROPIC_BASE_URL", "https://api.anthropic.com"}});
  EXPECT_NE(ran.output.find("CLAUDE_CODE_MAX_OUTPUT_TOKENS=512\n"), std::string::npos) << ran.output;
  EXPECT_NE(ran.output.find("ANTHROPIC_BASE_URL=" + url + "\n"), std::string::npos) << ran.output;
  // The agent's own arguments after --, and --print, which runs nothing.
  ran = testing::run_kvgate(
      {"run", "codex", "--url", url, "--agent-bin", "/bin/echo", "--print", "--", "exec", "a b"},
      {{"KVGATE_API_KEY", "secret-key"}});
  EXPECT_EQ(ran.code, 0) << ran.output;
  EXPECT_NE(ran.output.find("KVGATE_API_KEY=<key>"), std::string::npos) << ran.output;
  EXPECT_EQ(ran.output.find("secret-key"), std::string::npos) << ran.output;
  EXPECT_NE(
      ran.output.find("-c model_context_window=16384 -c model_auto_compact_token_limit=16384 exec 'a b'"),
      std::string::npos)
      << ran.output;
  // A wrong key, no kvgate, and an agent that is not installed: clear errors.
  ran = testing::run_kvgate({"run", "claude", "--url", url, "--agent-bin", "/usr/bin/env"},
                            {{"KVGATE_API_KEY", "x"}});
  EXPECT_EQ(ran.code, 1);
  EXPECT_NE(ran.output.find("wants an API key"), std::string::npos) << ran.output;
  ran = testing::run_kvgate({"run", "claude", "--url", "http://127.0.0.1:1"});
  EXPECT_EQ(ran.code, 1);
  EXPECT_NE(ran.output.find("kvgate up MODEL.gguf"), std::string::npos) << ran.output;
  ran = testing::run_kvgate({"run", "opencode", "--url", url},
                            {{"KVGATE_API_KEY", "secret-key"}, {"PATH", "/nonexistent"}});
  EXPECT_EQ(ran.code, 1);
  EXPECT_NE(ran.output.find("npm install -g opencode-ai"), std::string::npos) << ran.output;
}

// Windows: the agent is a .cmd shim (as npm installs claude, codex, qwen...), run through cmd.exe
// in kvgate's place: it gets kvgate's environment and the user's arguments, and its exit code
// is kvgate's.
TEST(KvgateRunTest, TheAgentIsACmdFileOnWindows) {
#ifndef _WIN32
  GTEST_SKIP() << "a .cmd agent runs on Windows (scripts/cross-windows.sh runs this under wine)";
#endif
  const auto front = served_front();
  const std::string url = "http://127.0.0.1:" + std::to_string(front->port());
  const auto dir =
      std::filesystem::temp_directory_path() / ("kvgate_run_agent_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto agent = dir / "claude.cmd";
  std::ofstream(agent, std::ios::binary)
      << "@echo off\r\n"
         "echo ANTHROPIC_BASE_URL=%ANTHROPIC_BASE_URL%\r\n"
         "echo ANTHROPIC_MODEL=%ANTHROPIC_MODEL%\r\n"
         "echo CLAUDE_CODE_MAX_CONTEXT_TOKENS=%CLAUDE_CODE_MAX_CONTEXT_TOKENS%\r\n"
         "echo args=[%*]\r\n"
         "exit /b 7\r\n";
  const auto ran =
      testing::run_kvgate({"run", "claude", "--url", url, "--agent-bin", agent.string(), "--", "a b", "c"},
                          {{"KVGATE_API_KEY", "secret-key"}});
  EXPECT_EQ(ran.code, 7) << ran.output;  // the agent's own exit code
  EXPECT_NE(ran.output.find("ANTHROPIC_BASE_URL=" + url), std::string::npos) << ran.output;
  EXPECT_NE(ran.output.find("ANTHROPIC_MODEL=Qwen3-8B-Q4_K_M"), std::string::npos) << ran.output;
  EXPECT_NE(ran.output.find("CLAUDE_CODE_MAX_CONTEXT_TOKENS=16384"), std::string::npos) << ran.output;
  EXPECT_NE(ran.output.find("args=[\"a b\" c]"), std::string::npos) << ran.output;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kvgate::cli
