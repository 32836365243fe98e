#include "cli/up_options.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <unistd.h>

namespace kvgate::cli {
namespace {

using std::chrono::milliseconds;

// Parses `args` (after the command name) as `kvgate up` would.
UpOptions parse(std::vector<std::string> args) {
  CLI::App app{"test", "kvgate up"};
  app.allow_windows_style_options(false);  // as parse_args() sets it: "/m.gguf" is a path on Windows too
  UpOptions o;
  add_up_options(app, o);
  args.insert(args.begin(), "kvgate up");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  app.parse(static_cast<int>(argv.size()), argv.data());
  return o;
}

UpConfig resolve(const UpOptions& o) {
  auto r = resolve_up_options(o);
  EXPECT_TRUE(r.ok()) << r.error().message();
  return r.ok() ? *r : UpConfig{};
}

std::string resolve_error(std::vector<std::string> args) {
  auto r = resolve_up_options(parse(std::move(args)));
  return r.ok() ? "ok" : r.error().message();
}

TEST(UpOptionsTest, PlanSpellingsAndDefaults) {
  const UpConfig d = resolve(parse({}));
  EXPECT_FALSE(d.model);
  EXPECT_EQ(d.listen.host, "127.0.0.1");
  EXPECT_EQ(d.listen.port, 8787);
  EXPECT_EQ(d.settings.ctx, 4096u);
  EXPECT_FALSE(d.n_gpu_layers);
  EXPECT_EQ(d.on_mismatch, engine::OnMismatch::kFail);
  EXPECT_EQ(d.session_retention, milliseconds(30LL * 24 * 3600 * 1000));
  EXPECT_EQ(d.max_stored_sessions, 20000u);
  const UpConfig kept = resolve(parse({"--session-retention", "0", "--max-stored-sessions", "500"}));
  EXPECT_EQ(kept.session_retention.count(), 0);
  EXPECT_EQ(kept.max_stored_sessions, 500u);
  EXPECT_NE(resolve_error({"--session-retention", "-1d"}).find("session-retention"), std::string::npos);

  const UpConfig c = resolve(
      parse({"m.gguf",      "-c",        "64k",        "--np",          "2",           "--ngl",
             "all",         "--kvu",     "--ctk",      "q8_0",          "--fa",        "on",
             "--cache-ram", "8GiB",      "--swa-full", "--on-mismatch", "warn",        "--health-interval",
             "250ms",       "--backoff", "2s",         "--listen",      "0.0.0.0:9000"}));
  EXPECT_EQ(c.model, "m.gguf");
  EXPECT_EQ(c.settings.ctx, 65536u);
  EXPECT_EQ(c.settings.parallel, 2u);
  EXPECT_EQ(c.n_gpu_layers, -1);
  EXPECT_EQ(c.settings.kv_unified, true);
  EXPECT_EQ(c.settings.cache_type_k, "q8_0");
  EXPECT_EQ(c.settings.cache_type_v, "q8_0");  // follows --ctk
  EXPECT_EQ(c.settings.flash_attn, plan::FlashAttn::kOn);
  EXPECT_EQ(c.settings.cache_ram_mib, 8192u);
  EXPECT_TRUE(c.settings.swa_full);
  EXPECT_EQ(c.on_mismatch, engine::OnMismatch::kWarn);
  EXPECT_EQ(c.timing.health_interval, milliseconds(250));
  EXPECT_EQ(c.restart.backoff_initial, milliseconds(2000));
  EXPECT_EQ(c.listen.host, "0.0.0.0");
  EXPECT_EQ(c.listen.port, 9000);

  const UpConfig v = resolve(parse({"--ctk", "q8_0", "--ctv", "q4_0", "--no-kvu", "--cache-ram", "512"}));
  EXPECT_EQ(v.settings.cache_type_v, "q4_0");
  EXPECT_EQ(v.settings.kv_unified, false);
  EXPECT_EQ(v.settings.cache_ram_mib, 512u);  // a bare number is MiB
}

TEST(UpOptionsTest, ConfigFileFillsWhatTheCommandLineLeftOpen) {
  UpOptions o = parse({"--parallel", "2"});
  auto st = merge_config_json(R"({"model": "/m/x.gguf", "ctx": "32k", "parallel": 4, "swa_full": true,
                                  "cache-ram-similarity": 0.5, "context_shift": false, "on_mismatch": "warn"})",
                              "cfg.json", o);
  ASSERT_TRUE(st.ok()) << st.error().message();
  const UpConfig c = resolve(o);
  EXPECT_EQ(c.model, "/m/x.gguf");
  EXPECT_EQ(c.settings.ctx, 32768u);
  EXPECT_EQ(c.settings.parallel, 2u);  // the command line wins
  EXPECT_TRUE(c.settings.swa_full);
  EXPECT_EQ(c.settings.cache_ram_similarity, 0.5);
  EXPECT_FALSE(c.settings.context_shift);
  EXPECT_EQ(c.on_mismatch, engine::OnMismatch::kWarn);

  UpOptions p;
  auto bad = merge_config_json(R"({"ctx": 4096, "bogus": 1})", "cfg.json", p);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message(), "cfg.json: unknown option \"bogus\" (kvgate up --help lists them)");
  auto nested = merge_config_json(R"({"ctx": [1]})", "cfg.json", p);
  ASSERT_FALSE(nested.ok());
  EXPECT_NE(nested.error().message().find("must be a string, number or boolean"), std::string::npos);
  EXPECT_FALSE(merge_config_json("[1,2]", "cfg.json", p).ok());
  EXPECT_FALSE(merge_config_json("{\"ctx\": ", "cfg.json", p).ok());
  EXPECT_FALSE(merge_config_json(R"({"config": "other.json"})", "cfg.json", p).ok());
  EXPECT_FALSE(merge_config_file("/nonexistent/kvgate.json", p).ok());
}

TEST(UpOptionsTest, ServeTakesTheGatewayOptionsAndItsUpstreamOnly) {
  UpOptions s;
  ASSERT_TRUE(
      merge_config_json(R"({"upstream": "http://box:8080", "upstream_key": "k", "listen": "127.0.0.1:9000",
                                   "high-watermark": "50%", "compaction": false})",
                        "serve.json", s, OptionSet::kServe)
          .ok());
  auto c = resolve_up_options(s);
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->upstream, "http://box:8080");
  EXPECT_EQ(c->upstream_key, "k");
  EXPECT_EQ(c->listen.port, 9000);
  EXPECT_FALSE(c->compaction);
  UpOptions engine;
  auto ctx = merge_config_json(R"({"ctx": 4096})", "serve.json", engine, OptionSet::kServe);
  ASSERT_FALSE(ctx.ok());
  EXPECT_EQ(ctx.error().message(), "serve.json: unknown option \"ctx\" (kvgate serve --help lists them)");
  UpOptions model;
  EXPECT_FALSE(merge_config_json(R"({"model": "m.gguf"})", "serve.json", model, OptionSet::kServe).ok());
  UpOptions up;
  EXPECT_FALSE(
      merge_config_json(R"({"upstream": "http://box:8080"})", "up.json", up).ok());  // up starts its own
}

TEST(UpOptionsTest, ServeTakesSeveralUpstreamsRepeatedOrAsAList) {
  CLI::App app{"test", "kvgate serve"};
  app.allow_windows_style_options(false);
  UpOptions o;
  add_up_options(app, o, OptionSet::kServe);
  std::vector<std::string> args = {"kvgate serve", "--upstream", "http://a:1",  "--upstream",
                                   "http://b:2",   "--routing",  "round-robin", "--conversation-header",
                                   "x-session-id"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  app.parse(static_cast<int>(argv.size()), argv.data());
  auto c = resolve_up_options(o);
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->upstream, "http://a:1,http://b:2");
  EXPECT_EQ(c->routing, "round-robin");
  EXPECT_EQ(c->conversation_header, "x-session-id");
  UpOptions file;
  ASSERT_TRUE(merge_config_json(R"({"upstream": ["http://a:1", "http://b:2"]})", "serve.json", file,
                                OptionSet::kServe)
                  .ok());
  EXPECT_EQ(resolve_up_options(file)->upstream, "http://a:1,http://b:2");
  UpOptions bad;
  EXPECT_FALSE(
      merge_config_json(R"({"upstream": ["http://a:1", 7]})", "serve.json", bad, OptionSet::kServe).ok());
  UpOptions not_up;
  EXPECT_FALSE(merge_config_json(R"({"routing": "affinity"})", "up.json", not_up).ok());  // serve only
}

TEST(UpOptionsTest, ArgumentsRoundTrip) {
  const UpOptions a = parse({"/m.gguf", "--ctx", "8k", "--swa-full", "--no-kvu", "--api-key", "k k", "--ngl",
                             "all", "--config", "/etc/kvgate.json"});
  const std::vector<std::string> args = to_up_args(a);
  EXPECT_EQ(args, (std::vector<std::string>{"/m.gguf", "--config", "/etc/kvgate.json", "--api-key", "k k",
                                            "--ctx", "8k", "--ngl", "all", "--no-kvu", "--swa-full"}));
  const UpOptions b = parse(args);
  EXPECT_EQ(b.values, a.values);
  EXPECT_EQ(b.model, a.model);
  EXPECT_EQ(b.config, a.config);
}

TEST(UpOptionsTest, BadValuesNameTheOption) {
  EXPECT_NE(resolve_error({"--ctx", "lots"}).find("--ctx 'lots'"), std::string::npos);
  EXPECT_NE(resolve_error({"--flash-attn", "maybe"}).find("--flash-attn 'maybe'"), std::string::npos);
  EXPECT_NE(resolve_error({"--kvu", "--no-kvu"}).find("contradict"), std::string::npos);
  EXPECT_NE(resolve_error({"--on-mismatch", "sometimes"}).find("expected fail or warn"), std::string::npos);
  EXPECT_NE(resolve_error({"--parallel", "0"}).find("--parallel '0'"), std::string::npos);
  EXPECT_NE(resolve_error({"--ngl", "-2"}).find("--ngl '-2'"), std::string::npos);
  EXPECT_NE(resolve_error({"--mla", "4"}).find("--mla '4'"), std::string::npos);
  EXPECT_NE(resolve_error({"--health-interval", "soon"}).find("--health-interval"), std::string::npos);
  EXPECT_NE(resolve_error({"--probe-timeout", "0s"}).find("must be positive"), std::string::npos);
  EXPECT_NE(resolve_error({"--cache-ram-similarity", "1.5"}).find("fraction"), std::string::npos);
  EXPECT_NE(resolve_error({"--listen", "127.0.0.1:99999"}).find("--listen"), std::string::npos);
  EXPECT_NE(resolve_error({"--log-max-size", "100B"}).find("at least 4KiB"), std::string::npos);
}

TEST(UpOptionsTest, ListenAddresses) {
  auto a = parse_listen("0.0.0.0:80");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "0.0.0.0");
  EXPECT_EQ(a->port, 80);
  auto b = parse_listen("8787");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->host, "127.0.0.1");
  auto c = parse_listen("[::1]:9000");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->host, "::1");
  EXPECT_EQ(c->port, 9000);
  EXPECT_FALSE(parse_listen(":80").ok());
  EXPECT_FALSE(parse_listen("host:").ok());
  EXPECT_FALSE(parse_listen("host:0").ok());
  EXPECT_FALSE(parse_listen("host:65536").ok());
}

TEST(UpOptionsTest, Durations) {
  EXPECT_EQ(*parse_duration("250ms"), milliseconds(250));
  EXPECT_EQ(*parse_duration("10s"), milliseconds(10000));
  EXPECT_EQ(*parse_duration("1.5s"), milliseconds(1500));
  EXPECT_EQ(*parse_duration("5m"), milliseconds(300000));
  EXPECT_EQ(*parse_duration("1h"), milliseconds(3600000));
  EXPECT_EQ(*parse_duration("2"), milliseconds(2000));
  EXPECT_EQ(*parse_duration("30d"), milliseconds(30LL * 24 * 3600 * 1000));
  for (auto bad : {"", "s", "10x", "-1s", "1..5s", "9999999999999h"})
    EXPECT_FALSE(parse_duration(bad).ok()) << bad;
}

}  // namespace
}  // namespace kvgate::cli

namespace kvgate::cli {
namespace {

TEST(UpOptionsTest, SeveralClientKeysEachTheirOwnScope) {
  const UpConfig c = resolve(parse({"--api-key", "alpha,beta"}));
  EXPECT_EQ(c.api_keys, (std::vector<std::string>{"alpha", "beta"}));
  ASSERT_TRUE(c.api_key.has_value());
  EXPECT_EQ(*c.api_key, "alpha");
  const auto file = std::filesystem::temp_directory_path() / ("kvgate-keys-" + std::to_string(::getpid()));
  {
    std::ofstream out(file);
    out << "# one key per line\nfirst-key\n\nsecond-key\r\n";
  }
  const UpConfig f = resolve(parse({"--api-key-file", file.string()}));
  EXPECT_EQ(f.api_keys, (std::vector<std::string>{"first-key", "second-key"}));
  std::filesystem::remove(file);
  EXPECT_NE(resolve_error({"--api-key", "a,,b"}).find("empty key"), std::string::npos);
  EXPECT_NE(resolve_error({"--api-key", "has space"}).find("spaces or control"), std::string::npos);
  EXPECT_NE(resolve_error({"--api-key-file", "/nonexistent/keys"}).find("cannot read"), std::string::npos);
}

TEST(UpOptionsTest, SeveralKeysTurnTheEnginesHostPromptCacheOff) {
  // Its host-memory prompt cache would hand one key's prompt state to another key's slot.
  const UpConfig two = resolve(parse({"--api-key", "alpha,beta"}));
  ASSERT_TRUE(two.settings.cache_ram_mib.has_value());
  EXPECT_EQ(*two.settings.cache_ram_mib, 0u);
  EXPECT_EQ(*resolve(parse({"--api-key", "alpha,beta", "--cache-ram", "0"})).settings.cache_ram_mib, 0u);
  EXPECT_NE(
      resolve_error({"--api-key", "alpha,beta", "--cache-ram", "4GiB"}).find("read, another key's prompts"),
      std::string::npos);
  // One key, or none: the engine's default, or what was asked.
  EXPECT_FALSE(resolve(parse({"--api-key", "alpha"})).settings.cache_ram_mib.has_value());
  EXPECT_EQ(*resolve(parse({"--api-key", "alpha", "--cache-ram", "4GiB"})).settings.cache_ram_mib, 4096u);
}

}  // namespace
}  // namespace kvgate::cli

namespace kvgate::cli {
namespace {

TEST(UpOptionsTest, EngineDevicesGiveEachEngineItsGpusAndTheirNumber) {
  UpConfig c = resolve(parse({"--engine-devices", "0,1,GPU-5f2a-77"}));
  EXPECT_EQ(c.engines, 3u);
  EXPECT_EQ(c.engine_devices, (std::vector<std::string>{"0", "1", "GPU-5f2a-77"}));
  c = resolve(parse({"--engines", "2", "--engine-devices", "0+1,2+3"}));
  EXPECT_EQ(c.engines, 2u);
  EXPECT_EQ(c.engine_devices, (std::vector<std::string>{"0,1", "2,3"}));
  EXPECT_EQ(resolve(parse({"--engines", "2"})).engine_devices, std::vector<std::string>{});
  EXPECT_NE(resolve_error({"--engines", "3", "--engine-devices", "0,1"}).find("2 GPU sets for 3 engines"),
            std::string::npos);
  for (auto bad : {"", "0,,1", "0,", "+0", "0++1", "0 1", "0;1", "0,1+"}) {
    EXPECT_NE(resolve_error({"--engine-devices", bad}).find("--engine-devices"), std::string::npos) << bad;
  }
}

}  // namespace
}  // namespace kvgate::cli

namespace kvgate::cli {
namespace {

// --allow-host on up and serve: repeated, comma-separated or a config list; '*' opens it.
TEST(UpOptionsTest, AllowedHostsRepeatedOrAsAList) {
  EXPECT_TRUE(resolve(parse({})).allowed_hosts.empty());
  const UpConfig c =
      resolve(parse({"--allow-host", "gpu-box.lan", "--allow-host", "proxy.example,Other-Host"}));
  EXPECT_EQ(c.allowed_hosts, (std::vector<std::string>{"gpu-box.lan", "proxy.example", "Other-Host"}));
  EXPECT_EQ(resolve(parse({"--allow-host", "*"})).allowed_hosts, (std::vector<std::string>{"*"}));
  for (const char* bad : {"host:8080", "", "a,,b", "evil/x", "a b"}) {
    EXPECT_NE(resolve_error({"--allow-host", bad}).find("--allow-host"), std::string::npos) << bad;
  }
  UpOptions file;
  ASSERT_TRUE(
      merge_config_json(R"({"allow_host": ["a.lan", "b.lan"]})", "serve.json", file, OptionSet::kServe).ok());
  EXPECT_EQ(resolve_up_options(file)->allowed_hosts, (std::vector<std::string>{"a.lan", "b.lan"}));
  const std::vector<std::string> args = to_up_args(parse({"--allow-host", "a.lan", "--allow-host", "b.lan"}));
  EXPECT_EQ(args, (std::vector<std::string>{"--allow-host", "a.lan,b.lan"}));
}

}  // namespace
}  // namespace kvgate::cli
