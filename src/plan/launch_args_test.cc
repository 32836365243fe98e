#include "plan/launch_args.h"

#include <algorithm>

#include <gtest/gtest.h>

#include "testing/probe_fixtures.h"

namespace kvgate::plan {
namespace {

using Args = std::vector<std::string>;

using testing::fixture_caps;

// True if `seq` appears contiguously in `args`.
bool has(const Args& args, const Args& seq) {
  return std::search(args.begin(), args.end(), seq.begin(), seq.end()) != args.end();
}

bool has_flag(const Args& args, const std::string& flag) {
  return std::find(args.begin(), args.end(), flag) != args.end();
}

std::string error_of(const ServerSettings& s, const ServerCaps& caps) {
  auto r = launch_args(s, caps);
  return r.ok() ? "ok: " + redacted_command_line(*r) : r.error().message();
}

ServerSettings base() {
  ServerSettings s;
  s.model_path = "/m/model.gguf";
  return s;
}

TEST(LaunchArgsTest, MainlineDefaultsAreExplicit) {
  auto args = launch_args(base(), fixture_caps("mainline"));
  ASSERT_TRUE(args.ok()) << args.error().message();
  EXPECT_EQ(*args, (Args{"-m",
                         "/m/model.gguf",
                         "-c",
                         "4096",
                         "-np",
                         "1",
                         "-ngl",
                         "0",
                         "-ctk",
                         "f16",
                         "-ctv",
                         "f16",
                         "-b",
                         "2048",
                         "-ub",
                         "512",
                         "-fa",
                         "auto",
                         "--no-context-shift",
                         "-to",
                         "3600",
                         "--jinja",
                         "--metrics",
                         "-lv",
                         "4",
                         "-fit",
                         "off"}));
}

TEST(LaunchArgsTest, IkDefaultsSayContextShiftOff) {
  // --log-disable: ik writes no ./llama.log (stderr, which kvgate reads, keeps every line).
  auto args = launch_args(base(), fixture_caps("ik"));
  ASSERT_TRUE(args.ok()) << args.error().message();
  EXPECT_EQ(*args, (Args{"-m",
                         "/m/model.gguf",
                         "-c",
                         "4096",
                         "-np",
                         "1",
                         "-ngl",
                         "0",
                         "-ctk",
                         "f16",
                         "-ctv",
                         "f16",
                         "-b",
                         "2048",
                         "-ub",
                         "512",
                         "-fa",
                         "auto",
                         "--context-shift",
                         "off",
                         "-to",
                         "3600",
                         "--jinja",
                         "--metrics",
                         "--log-disable"}));
}

// The seed deployment's ik flags: -cram 8192 -crs 0.50 -cram-n-min 32 --context-shift on -to 1800 -fa on
TEST(LaunchArgsTest, IkSpellsTheSeedConfiguration) {
  ServerSettings s = base();
  s.ctx = 262144;
  s.cache_type_k = "q4_0";
  s.cache_type_v = "q4_0";
  s.n_gpu_layers = -1;
  s.cache_ram_mib = 8192;
  s.cache_ram_similarity = 0.5;
  s.cache_ram_n_min = 32;
  s.context_shift = true;
  s.timeout_s = 1800;
  s.flash_attn = FlashAttn::kOn;
  auto args = launch_args(s, fixture_caps("ik"));
  ASSERT_TRUE(args.ok()) << args.error().message();
  for (const Args& seq :
       {Args{"-cram", "8192"}, Args{"-crs", "0.50"}, Args{"-cram-n-min", "32"}, Args{"--context-shift", "on"},
        Args{"-to", "1800"}, Args{"-fa", "on"}, Args{"-c", "262144"}, Args{"-ctk", "q4_0"},
        Args{"-ctv", "q4_0"}, Args{"-ngl", "999"}}) {
    EXPECT_TRUE(has(*args, seq)) << seq[0] << " " << seq[1] << " in " << redacted_command_line(*args);
  }
  for (auto absent : {"-lv", "-fit", "--no-context-shift", "--cache-reuse", "-kvu"}) {
    EXPECT_FALSE(has_flag(*args, absent)) << absent;
  }
}

TEST(LaunchArgsTest, MainlineSpellings) {
  const ServerCaps caps = fixture_caps("mainline");
  ServerSettings s = base();
  s.n_gpu_layers = -1;
  s.context_shift = true;
  s.flash_attn = FlashAttn::kOff;
  s.cache_reuse = 256;
  s.cache_ram_mib = 0;
  s.kv_unified = false;
  s.swa_full = true;
  s.ctx_checkpoints = 4;
  s.threads = 2;
  s.jinja = false;
  s.alias = "m";
  s.api_key = "secret";
  auto args = launch_args(s, caps);
  ASSERT_TRUE(args.ok()) << args.error().message();
  for (const Args& seq :
       {Args{"-ngl", "all"}, Args{"--context-shift", "-to"}, Args{"-fa", "off"}, Args{"--cache-reuse", "256"},
        Args{"-cram", "0"}, Args{"-no-kvu"}, Args{"--swa-full"}, Args{"--ctx-checkpoints", "4"},
        Args{"-t", "2"}, Args{"--no-jinja"}, Args{"-a", "m"}, Args{"--api-key", "secret"}}) {
    EXPECT_TRUE(has(*args, seq)) << seq[0] << " in " << redacted_command_line(*args);
  }
  const std::string printed = redacted_command_line(*args);
  EXPECT_EQ(printed.find("secret"), std::string::npos) << printed;
  EXPECT_NE(printed.find("--api-key ***"), std::string::npos) << printed;
}

// /proc/PID/cmdline is world-readable: with a key file, the key never reaches the command
// line on either fork (both accept --api-key-file); a build without it gets the key itself.
TEST(LaunchArgsTest, KeyFileKeepsTheKeyOffTheCommandLine) {
  for (const char* fork : {"mainline", "ik"}) {
    ServerCaps caps = fixture_caps(fork);
    ASSERT_TRUE(caps.accepts("--api-key-file /dev/null")) << fork;
    ServerSettings s = base();
    s.api_key = "secret-key";
    s.api_key_file = "/state/engine.key";
    auto args = launch_args(s, caps);
    ASSERT_TRUE(args.ok()) << args.error().message();
    EXPECT_TRUE(has(*args, {"--api-key-file", "/state/engine.key"})) << fork;
    EXPECT_FALSE(has_flag(*args, "--api-key")) << fork;
    for (const auto& a : *args) EXPECT_EQ(a.find("secret-key"), std::string::npos) << fork;
    caps.accepted.erase("--api-key-file /dev/null");
    args = launch_args(s, caps);
    ASSERT_TRUE(args.ok());
    EXPECT_TRUE(has(*args, {"--api-key", "secret-key"})) << fork;
  }
}

TEST(LaunchArgsTest, IkFlashAttentionAndJinja) {
  const ServerCaps caps = fixture_caps("ik");
  ServerSettings s = base();
  s.flash_attn = FlashAttn::kOff;
  s.jinja = false;
  s.kv_unified = false;  // ik never unifies: nothing to say
  s.mla = 1;
  auto args = launch_args(s, caps);
  ASSERT_TRUE(args.ok()) << args.error().message();
  EXPECT_TRUE(has(*args, {"-fa", "off"}));
  EXPECT_TRUE(has(*args, {"-mla", "1"}));
  EXPECT_FALSE(has_flag(*args, "--jinja"));
  EXPECT_FALSE(has_flag(*args, "--no-jinja"));
  EXPECT_FALSE(has_flag(*args, "-no-kvu"));
}

TEST(LaunchArgsTest, OlderBuildWithBareFlashAttnFlag) {
  ServerCaps caps = fixture_caps("ik");
  caps.accepted.erase("-fa on");
  caps.accepted.insert("-fa");
  ServerSettings s = base();
  s.flash_attn = FlashAttn::kOn;
  auto args = launch_args(s, caps);
  ASSERT_TRUE(args.ok()) << args.error().message();
  auto it = std::find(args->begin(), args->end(), "-fa");
  ASSERT_NE(it, args->end());
  ASSERT_NE(it + 1, args->end());
  EXPECT_EQ(*(it + 1), "--context-shift");  // bare: no value follows
}

TEST(LaunchArgsTest, SettingsTheBuildCannotExpressAreErrors) {
  const ServerCaps ik = fixture_caps("ik");
  const ServerCaps ml = fixture_caps("mainline");
  ServerSettings reuse = base();
  reuse.cache_reuse = 256;
  std::string e = error_of(reuse, ik);
  EXPECT_NE(e.find("setting cache_reuse = 256"), std::string::npos) << e;
  EXPECT_NE(e.find("ik_llama.cpp build 4840"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown argument: --cache-reuse"), std::string::npos) << e;
  reuse.cache_reuse = 0;  // "disabled" needs no flag
  EXPECT_EQ(error_of(reuse, ik).substr(0, 3), "ok:");

  ServerSettings crs = base();
  crs.cache_ram_similarity = 0.5;
  e = error_of(crs, ml);
  EXPECT_NE(e.find("setting cache_ram_similarity = 0.50"), std::string::npos) << e;
  EXPECT_NE(e.find("mainline llama.cpp 0.4.0-dev"), std::string::npos) << e;

  ServerSettings nmin = base();
  nmin.cache_ram_n_min = 32;
  EXPECT_NE(error_of(nmin, ml).find("setting cache_ram_n_min = 32"), std::string::npos);

  ServerSettings unified = base();
  unified.kv_unified = true;
  EXPECT_NE(error_of(unified, ik).find("setting kv_unified = true"), std::string::npos);
  EXPECT_EQ(error_of(unified, ml).substr(0, 3), "ok:");

  ServerSettings swa = base();
  swa.swa_full = true;
  EXPECT_NE(error_of(swa, ik).find("setting swa_full = true"), std::string::npos);

  ServerSettings mla = base();
  mla.mla = 3;
  EXPECT_NE(error_of(mla, ml).find("setting mla = 3"), std::string::npos);

  ServerSettings q6 = base();
  q6.cache_type_k = "q6_0";
  e = error_of(q6, ml);
  EXPECT_NE(e.find("setting cache_type_k = q6_0"), std::string::npos) << e;
  EXPECT_NE(e.find("f32, f16, bf16, q8_0"), std::string::npos) << e;
  EXPECT_EQ(error_of(q6, ik).substr(0, 3), "ok:");

  ServerSettings bogus = base();
  bogus.cache_type_v = "q3_x";
  EXPECT_NE(error_of(bogus, ik).find("setting cache_type_v = q3_x"), std::string::npos);

  ServerSettings zero = base();
  zero.ctx = 0;
  EXPECT_NE(error_of(zero, ml).find("setting ctx = 0"), std::string::npos);
}

TEST(LaunchArgsTest, ATemplateFileIsPassedWhereTheBuildListsIt) {
  for (const char* fork : {"mainline", "ik"}) {
    ServerCaps caps = fixture_caps(fork);
    ServerSettings s = base();
    s.chat_template_file = "/state/chat-template.jinja";
    auto args = launch_args(s, caps);
    ASSERT_TRUE(args.ok()) << fork << ": " << args.error().message();
    EXPECT_TRUE(has(*args, {"--chat-template-file", "/state/chat-template.jinja"})) << fork;
    s.jinja = false;
    std::string e = error_of(s, caps);
    EXPECT_NE(e.find("setting chat_template_file cannot be expressed"), std::string::npos) << e;
    EXPECT_NE(e.find("jinja templates are off"), std::string::npos) << e;
    s.jinja = true;
    caps.help_flags.erase("--chat-template-file");
    e = error_of(s, caps);
    EXPECT_NE(e.find("lists no --chat-template-file"), std::string::npos) << e;
    EXPECT_NE(e.find("--stable-template off"), std::string::npos) << e;
  }
  EXPECT_FALSE(has_flag(*launch_args(base(), fixture_caps("mainline")), "--chat-template-file"));
}

TEST(LaunchArgsTest, RedactedCommandLineQuotes) {
  EXPECT_EQ(redacted_command_line({"/bin/llama-server", "-m", "/a b/it's.gguf", "--api-key", "k"}),
            "/bin/llama-server -m '/a b/it'\\''s.gguf' --api-key ***");
}

}  // namespace
}  // namespace kvgate::plan
