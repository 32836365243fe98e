#include "plan/server_caps.h"

#include <gtest/gtest.h>

#include "testing/probe_fixtures.h"

namespace kvgate::plan {
namespace {

// tests/fixtures/mainline/probes.txt was recorded from the pinned llama-server;
// tests/fixtures/ik/probes.txt from the real ik_llama.cpp CPU build 8337e4cd3
// (scripts/record-ik-fixtures.sh).
using testing::fixture_caps;
using testing::read_fixture;

TEST(ServerCapsTest, MainlineFixture) {
  const ServerCaps c = fixture_caps("mainline");
  EXPECT_EQ(c.fork, Fork::kMainline);
  EXPECT_EQ(c.version, "0.4.0-dev");
  EXPECT_EQ(c.build, 1u);
  EXPECT_EQ(c.commit, "80fb11a");
  EXPECT_EQ(c.built_with, "GNU 12.2.0 for Linux x86_64");
  EXPECT_TRUE(c.accepts("--cache-reuse 0"));
  EXPECT_TRUE(c.accepts("--context-shift"));
  EXPECT_TRUE(c.accepts("-lv 4"));
  EXPECT_FALSE(c.accepts("--context-shift on"));
  EXPECT_FALSE(c.accepts("-crs 0.50"));
  EXPECT_FALSE(c.accepts("-mla 3"));
  EXPECT_FALSE(c.accepts("-fa"));  // "-fa" consumes the next argument as its value
  EXPECT_NE(c.rejection("-crs 0.50").find("invalid argument: -crs"), std::string::npos)
      << c.rejection("-crs 0.50");
  // The types mainline's parser accepts (server_behaviour.md §2.1).
  EXPECT_EQ(c.kv_types, (std::vector<std::string>{"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl",
                                                  "q5_0", "q5_1"}));
  for (auto f :
       {"--cache-reuse", "-kvu", "--no-kv-unified", "--flash-attn", "-ngl", "--n-gpu-layers", "-lv"}) {
    EXPECT_TRUE(c.help_flags.count(f)) << f;
  }
  EXPECT_EQ(c.describe(), "mainline llama.cpp 0.4.0-dev (build 1, commit 80fb11a) at llama-server");
  EXPECT_FALSE(c.gpu_offload);  // the pinned engine is a CPU build
}

TEST(ServerCapsTest, IkFixture) {
  const ServerCaps c = fixture_caps("ik");
  EXPECT_EQ(c.fork, Fork::kIk);
  EXPECT_EQ(c.version, "");
  EXPECT_EQ(c.build, 4840u);
  EXPECT_EQ(c.commit, "8337e4cd3");  // ik prints nine hex digits
  for (auto p : {"-cram 0", "-crs 0.50", "-cram-n-min 0", "--context-shift on", "--context-shift off",
                 "-fa on", "-no-fa", "-mla 3", "-a kvgate-probe"}) {
    EXPECT_TRUE(c.accepts(p)) << p;
  }
  for (auto p : {"--cache-reuse 0", "--context-shift", "-fa", "-lv 4", "-kvu", "--swa-full", "-ngl all",
                 "--sse-ping-interval 30", "--no-jinja", "-fit off"}) {
    EXPECT_FALSE(c.accepts(p)) << p;
  }
  EXPECT_NE(c.rejection("--cache-reuse 0").find("unknown argument: --cache-reuse"), std::string::npos);
  EXPECT_NE(c.rejection("--context-shift").find("invalid parameter for argument: --context-shift"),
            std::string::npos);
  // ik checks cache types only at model load, so the documented list applies (with q6_0, q8_KV).
  EXPECT_TRUE(c.accepts_kv_type("q6_0"));
  EXPECT_TRUE(c.accepts_kv_type("q8_KV"));
  EXPECT_FALSE(c.accepts_kv_type("kvgate-no-such-type"));
  // ik's --help omits flags its parser accepts: probes, not help, decide.
  EXPECT_FALSE(c.help_flags.count("-a"));
  EXPECT_FALSE(c.help_flags.count("--alias"));
  EXPECT_TRUE(c.help_flags.count("-cram-n-min"));
  EXPECT_TRUE(c.help_flags.count("--ctx-checkpoints-interval"));
  // "warning: not compiled with GPU offload support, --gpu-layers option will be ignored"
  EXPECT_FALSE(c.gpu_offload);
  // ik parses -ngl with stoi: "all" is not a count.
  EXPECT_EQ(c.rejection("-ngl all"), "stoi");
  EXPECT_TRUE(c.accepts("-ctx-ckpt-t 8"));
}

TEST(ServerCapsTest, RecordRoundTrip) {
  for (auto fork : {"mainline", "ik"}) {
    const std::string text = read_fixture(std::string(fork) + "/probes.txt");
    auto rec = parse_probe_record(text);
    ASSERT_TRUE(rec.ok()) << rec.error().message();
    EXPECT_EQ(format_probe_record(*rec), text) << fork;
  }
}

TEST(ServerCapsTest, MalformedRecords) {
  auto err = [](std::string_view text) {
    auto r = parse_probe_record(text);
    return r.ok() ? std::string("ok") : r.error().message();
  };
  EXPECT_NE(err("not a record\n").find("line 1"), std::string::npos);
  EXPECT_NE(
      err("kvgate-probe-record 1\nrun --version\nexit 0\nlines 3\nonly one\n").find("only 1 lines follow"),
      std::string::npos);
  EXPECT_NE(err("kvgate-probe-record 1\nrun --version\nexit zero\n").find("line 3: expected 'exit N'"),
            std::string::npos);
  EXPECT_NE(err("kvgate-probe-record 1\nrun -x\nexit 0\nlines 0\nrun -x\nexit 0\nlines 0\n")
                .find("duplicate run '-x'"),
            std::string::npos);
  EXPECT_NE(err("kvgate-probe-record 1\nbogus\n").find("expected 'run ARGS'"), std::string::npos);
  // Every truncation of a valid record either parses or fails cleanly.
  const std::string text = read_fixture("ik/probes.txt");
  for (size_t n = 0; n < text.size(); n += 7) (void)parse_probe_record(text.substr(0, n));
}

TEST(ServerCapsTest, AnalysisErrors) {
  auto rec = *parse_probe_record(read_fixture("mainline/probes.txt"));
  ProbeRecord missing = rec;
  missing.runs.erase("-crs 0.50 --version");
  auto a = analyze_probes(missing);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.error().message().find("lacks the probe '-crs 0.50 --version'"), std::string::npos);

  ProbeRecord not_server = rec;
  not_server.runs["--version"] = {127, {"sh: 1: exec format error"}};
  auto b = analyze_probes(not_server);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message().find("is this a llama-server"), std::string::npos);

  // No fork-specific flag and an unfamiliar error wording: the fork cannot be told.
  ProbeRecord odd = rec;
  odd.runs["--cache-reuse 0 --version"] = {1, {"error: nope"}};
  odd.runs["--kvgate-no-such-flag --version"] = {1, {"error: nope"}};
  odd.runs["--help"] = {0, {"usage: something"}};
  auto c = analyze_probes(odd);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message().find("cannot tell"), std::string::npos);

  // Older mainline without --cache-reuse is still recognised by its error wording.
  ProbeRecord old = rec;
  old.runs["--cache-reuse 0 --version"] = {1, {"error: invalid argument: --cache-reuse"}};
  auto d = analyze_probes(old);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->fork, Fork::kMainline);
}

TEST(ServerCapsTest, VersionFormats) {
  ServerCaps a;
  parse_version({"version: 4840 (8337e4cd)", "built with cc 12 for x86_64-linux-gnu"}, a);
  EXPECT_EQ(a.build, 4840u);
  EXPECT_EQ(a.commit, "8337e4cd");
  EXPECT_EQ(a.version, "");
  EXPECT_EQ(a.built_with, "cc 12 for x86_64-linux-gnu");
  ServerCaps b;
  parse_version({"version: 0.4.1-dev (build 10991, commit 930e2fa59)"}, b);
  EXPECT_EQ(b.version, "0.4.1-dev");
  EXPECT_EQ(b.build, 10991u);
  EXPECT_EQ(b.commit, "930e2fa59");
  ServerCaps c;
  parse_version({"version: 1 (unknown)"}, c);
  EXPECT_EQ(c.commit, "unknown");
}

TEST(ServerCapsTest, HelpFlagParsing) {
  auto flags = parse_help_flags({
      "-kvu,  --kv-unified, -no-kvu, --no-kv-unified",
      "                                        use single unified KV buffer",
      "                                         - 0: generic output",
      "-fa,   --flash-attn [on|off|auto]       set Flash Attention use ('on', 'off', or 'auto')",
      "  -cram-n-min, --cache-ram-n-min N minimum number of the cached tokens",
      "--spec-draft-type-k, -ctkd, --cache-type-k-draft TYPE",
      "-ot,   --override-tensor <tensor name pattern>=<buffer type>,...",
  });
  EXPECT_EQ(flags,
            (std::set<std::string>{"-kvu", "--kv-unified", "-no-kvu", "--no-kv-unified", "-fa",
                                   "--flash-attn", "-cram-n-min", "--cache-ram-n-min", "--spec-draft-type-k",
                                   "-ctkd", "--cache-type-k-draft", "-ot", "--override-tensor"}));
}

}  // namespace
}  // namespace kvgate::plan
