// `kvgate plan` and `kvgate doctor` as a user runs them: the binary on metadata-only models
// and on the startup-log fixtures; JSON documents, exit codes, error messages.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gguf/synth.h"
#include "testing/cli_test_support.h"
#include "testing/paths.h"

namespace kvgate::cli {
namespace {

using testing::Ran;

using nlohmann::json;

Ran kvgate(const std::vector<std::string>& args) { return testing::run_kvgate(args); }

json parse(const Ran& r) {
  auto j = json::parse(r.output, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.output;
  return j;
}

std::string fixture(const std::string& name) { return std::string(kvgate::testing::source_dir()) + "/tests/fixtures/logs/" + name; }

class PlanCliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    for (const char* name : {"qwen3-48l", "qwen35-27b", "gemma3-27b"}) {
      const auto path = std::filesystem::temp_directory_path() / fmt::format("kvgate_cli_{}_{}.gguf", name, ::getpid());
      ASSERT_TRUE(gguf::synthesize(gguf::find_synth_preset(name)->spec, nullptr, path).ok());
    }
  }
  static void TearDownTestSuite() {
    for (const char* name : {"qwen3-48l", "qwen35-27b", "gemma3-27b"}) std::filesystem::remove(model(name));
  }
  static std::string model(const char* name) {
    return (std::filesystem::temp_directory_path() / fmt::format("kvgate_cli_{}_{}.gguf", name, ::getpid())).string();
  }
};

TEST_F(PlanCliTest, SeedCasesThroughTheCommand) {
  Ran dense = kvgate({"plan", model("qwen3-48l"), "--ctx", "256k", "--ctk", "q4_0", "--json"});
  ASSERT_EQ(dense.code, 0) << dense.output;
  json j = parse(dense);
  EXPECT_EQ(j["kv"]["mib"], 6912.0);
  EXPECT_EQ(j["kv_caches"][0]["type_v"], "q4_0") << "V follows K when --ctv is not given";
  Ran hybrid = kvgate({"plan", model("qwen35-27b"), "--ctx", "262144", "--json"});
  ASSERT_EQ(hybrid.code, 0) << hybrid.output;
  EXPECT_EQ(parse(hybrid)["kv"]["mib"], 16384.0);
}

TEST_F(PlanCliTest, JsonCarriesEveryFigure) {
  Ran r = kvgate({"plan", model("qwen35-27b"), "--ctx", "131072", "--np", "4", "--kvu", "--ctk", "q8_0", "--memory",
                  "96GiB", "--json"});
  ASSERT_EQ(r.code, 0) << r.output;
  json j = parse(r);
  for (auto key : {"model", "fork", "settings", "context", "kv_caches", "kv", "recurrent", "components", "offload",
                   "totals", "budget", "capacity", "estimate", "notes", "command", "command_line"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["kv"]["mib"], 4352.0);
  EXPECT_EQ(j["recurrent"]["mib"], 598.5);
  EXPECT_EQ(j["recurrent"]["r_mib"], 22.5);
  EXPECT_EQ(j["context"]["n_ctx_slot"], 131072);
  EXPECT_TRUE(j["budget"]["fits"]);
  uint64_t sum = 0;
  for (const auto& c : j["components"]) sum += c["device_bytes"].get<uint64_t>() + c["host_bytes"].get<uint64_t>();
  EXPECT_EQ(sum, j["totals"]["total_bytes"].get<uint64_t>());
  const std::string line = j["command_line"];
  for (auto flag : {"-c 131072", "-np 4", "-kvu", "-ctk q8_0", "-ctv q8_0", "-lv 4"}) {
    EXPECT_NE(line.find(flag), std::string::npos) << flag << " in " << line;
  }
  EXPECT_EQ(j["capacity"]["text"][1]["kind"], "chinese_prose");
}

TEST_F(PlanCliTest, VerdictAndFit) {
  Ran over = kvgate({"plan", model("qwen3-48l"), "--ctx", "256k", "--memory", "8GiB"});
  EXPECT_EQ(over.code, 1) << over.output;
  EXPECT_NE(over.output.find("DOES NOT FIT"), std::string::npos) << over.output;
  Ran fit = kvgate({"plan", model("qwen3-48l"), "--fit", "--ctk", "auto", "--memory", "24GiB", "--cache-ram", "0",
                    "--json"});
  ASSERT_EQ(fit.code, 0) << fit.output;
  json j = parse(fit);
  EXPECT_EQ(j["settings"]["cache_type_k"], "q8_0");
  EXPECT_EQ(j["fit"]["trials"][0]["type"], "f16");
  EXPECT_LE(j["totals"]["total_bytes"].get<uint64_t>(), 24ULL << 30);
  EXPECT_EQ(j["context"]["n_ctx"], 262144);
}

// --weights re-types the metadata-only Qwen3.5-27B shape for a recipe; figures by hand:
// token_embd q3_K 248320 × 20 blocks × 110 = 546,304,000 bytes (on the host with -ngl all),
// output q6_K 248320 × 20 × 210 = 1,042,944,000.
TEST_F(PlanCliTest, WeightsRecipe) {
  Ran r = kvgate({"plan", model("qwen35-27b"), "--weights", "q3_k_m", "--ctx", "256k", "--ctk", "q4_0", "--json"});
  ASSERT_EQ(r.code, 0) << r.output;
  json j = parse(r);
  EXPECT_EQ(j["model"]["weights"]["recipe"], "Q3_K_M");
  EXPECT_EQ(j["model"]["weights"]["imatrix"], true);
  EXPECT_EQ(j["model"]["weights"]["fallbacks"], 0);
  EXPECT_EQ(j["components"][0]["name"], "weights");
  EXPECT_EQ(j["components"][0]["host_bytes"], 546304000u);
  uint64_t q6 = 0;
  for (const auto& t : j["model"]["weights"]["by_type"]) {
    if (t["type"] == "q6_K") q6 = t["bytes"];
  }
  EXPECT_EQ(q6, 1042944000u) << "only the output matrix is q6_K";
  EXPECT_EQ(j["kv"]["mib"], 4608.0) << "the KV does not depend on the weights";
  // The file's own types (f16) without --weights.
  Ran own = kvgate({"plan", model("qwen35-27b"), "--json"});
  ASSERT_EQ(own.code, 0) << own.output;
  EXPECT_TRUE(parse(own)["model"]["weights"]["recipe"].is_null());
  Ran text = kvgate({"plan", model("qwen35-27b"), "--weights", "IQ2_M"});
  ASSERT_EQ(text.code, 0) << text.output;
  EXPECT_NE(text.output.find("at IQ2_M with an importance matrix"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("figures are for that recipe"), std::string::npos) << text.output;
  Ran bad = kvgate({"plan", model("qwen35-27b"), "--weights", "Q3_K_XL"});
  EXPECT_EQ(bad.code, 2) << bad.output;
  EXPECT_NE(bad.output.find("IQ2_M"), std::string::npos) << "lists the recipes: " << bad.output;
  EXPECT_EQ(kvgate({"plan", model("qwen35-27b"), "--no-imatrix"}).code, 2) << "--no-imatrix needs --weights";
}

// --unified-memory: the host caches left unset are sized from the budget and passed to the
// server; explicit flags win; without the option the engine defaults stay.
TEST_F(PlanCliTest, UnifiedMemoryDefaults) {
  const std::vector<std::string> base = {"plan", model("qwen35-27b"), "--weights", "Q3_K_M", "--ctx", "256k",
                                         "--ctk", "q4_0", "--fork", "ik", "--memory", "32GB", "--reserve", "3GiB"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = base;
    a.insert(a.end(), extra.begin(), extra.end());
    return kvgate(a);
  };
  Ran today = with({"--json"});
  EXPECT_EQ(today.code, 1) << "8 GiB prompt cache + 32 checkpoints do not fit next to the model";
  json t = parse(today);
  EXPECT_TRUE(t["host_cache_sizing"].is_null());
  EXPECT_EQ(t["unified_memory"], false);
  Ran sized = with({"--unified-memory", "--json"});
  ASSERT_EQ(sized.code, 0) << sized.output;
  json j = parse(sized);
  EXPECT_EQ(j["unified_memory"], true);
  ASSERT_FALSE(j["host_cache_sizing"].is_null());
  const uint32_t checkpoints = j["host_cache_sizing"]["ctx_checkpoints"];
  EXPECT_GE(checkpoints, 1u);
  EXPECT_LE(checkpoints, 8u);
  EXPECT_EQ(j["settings"]["ctx_checkpoints"], checkpoints);
  const std::string line = j["command_line"];
  EXPECT_NE(line.find(fmt::format("-ctx-ckpt {}", checkpoints)), std::string::npos) << line;
  EXPECT_NE(line.find("-cram "), std::string::npos) << line;
  EXPECT_TRUE(j["budget"]["fits"]);
  Ran explicit_flags = with({"--unified-memory", "--cache-ram", "1024", "--ctx-checkpoints", "2", "--json"});
  json e = parse(explicit_flags);
  EXPECT_TRUE(e["host_cache_sizing"].is_null());
  EXPECT_EQ(e["settings"]["cache_ram_mib"], 1024);
  EXPECT_EQ(e["settings"]["ctx_checkpoints"], 2);
  Ran fit = with({"--unified-memory", "--fit"});
  EXPECT_EQ(fit.code, 0) << fit.output;
  EXPECT_NE(fit.output.find("order on unified memory: context first"), std::string::npos) << fit.output;
}

TEST_F(PlanCliTest, UsageErrors) {
  EXPECT_EQ(kvgate({"plan", model("qwen3-48l"), "--ctk", "q6_0"}).code, 2) << "q6_0 is ik-only";
  EXPECT_EQ(kvgate({"plan", model("qwen3-48l"), "--ctk", "q6_0", "--fork", "ik"}).code, 0);
  EXPECT_EQ(kvgate({"plan", model("qwen3-48l"), "--ctk", "auto"}).code, 2);
  EXPECT_EQ(kvgate({"plan", model("qwen3-48l"), "--fit"}).code, 2) << "no --memory";
  EXPECT_EQ(kvgate({"plan", model("qwen3-48l"), "--ctx", "lots"}).code, 2);
  Ran refused = kvgate({"plan", model("qwen3-48l"), "--ctv", "q4_0", "--flash-attn", "off"});
  EXPECT_EQ(refused.code, 1);
  EXPECT_NE(refused.output.find("flash attention"), std::string::npos) << refused.output;
  Ran missing = kvgate({"plan", "/nonexistent.gguf"});
  EXPECT_EQ(missing.code, 1);
}

TEST_F(PlanCliTest, DoctorOnFixtures) {
  Ran ok = kvgate({"doctor", "--log", fixture("mainline_qwen35_27b_cuda.log"), "--model", model("qwen35-27b"), "--ctx",
                   "131072", "--np", "4", "--kvu", "--ctk", "q8_0", "--json"});
  EXPECT_EQ(ok.code, 0) << ok.output;
  json j = parse(ok);
  EXPECT_TRUE(j["ok"]);
  EXPECT_EQ(j["compared_with"], "plan");
  EXPECT_EQ(j["facts"]["kv_caches"][0]["mib"], 4352.0);
  EXPECT_EQ(j["plan"]["kv"]["mib"], 4352.0);

  Ran bad = kvgate({"doctor", "--log", fixture("mainline_gemma3_27b_mismatch.log"), "--model", model("gemma3-27b"),
                    "--ctx", "32768", "--ctk", "q8_0", "--json"});
  EXPECT_EQ(bad.code, 1) << bad.output;
  std::set<std::string> codes;
  const json bad_json = parse(bad);
  for (const auto& f : bad_json["findings"]) codes.insert(f["code"].get<std::string>());
  for (auto code : {"context_smaller", "kv_type_mismatch", "fewer_cells", "kv_smaller_than_planned", "partial_offload"}) {
    EXPECT_TRUE(codes.count(code)) << code;
  }

  Ran ik = kvgate({"doctor", "--log", fixture("ik_qwen3_235b.log"), "--ctx", "32768", "--ctk", "q8_0"});
  EXPECT_EQ(ik.code, 0) << ik.output;
  EXPECT_NE(ik.output.find("ik_llama.cpp"), std::string::npos);
  Ran ik_wrong = kvgate({"doctor", "--log", fixture("ik_qwen3_235b.log"), "--ctk", "q4_0"});
  EXPECT_EQ(ik_wrong.code, 1) << ik_wrong.output;

  Ran lv3 = kvgate({"doctor", "--log", fixture("pinned_qwen35_np2_lv3.log")});
  EXPECT_EQ(lv3.code, 1);
  EXPECT_NE(lv3.output.find("-lv 4"), std::string::npos) << lv3.output;
  Ran junk = kvgate({"doctor", "--log", fixture("not_a_server_log.txt")});
  EXPECT_EQ(junk.code, 1);
  EXPECT_NE(junk.output.find("not a llama-server startup log"), std::string::npos) << junk.output;
  EXPECT_EQ(kvgate({"doctor", "--log", "/nonexistent.log"}).code, 1);
  EXPECT_EQ(kvgate({"doctor", "--no-such-flag"}).code, 2) << "an unknown option is a usage error";
  // With a model and no settings, the settings come from the log and the sizes are checked.
  const auto tiny = std::filesystem::temp_directory_path() / fmt::format("kvgate_cli_tiny_qwen35_{}.gguf", ::getpid());
  gguf::SynthSpec spec = *gguf::synth_defaults("qwen35");
  spec.metadata_only = true;
  ASSERT_TRUE(gguf::synthesize(spec, nullptr, tiny).ok());
  Ran from_log = kvgate({"doctor", "--log", fixture("pinned_qwen35_np2_q8_0_lv4.log"), "--model", tiny.string(), "--json"});
  EXPECT_EQ(from_log.code, 0) << from_log.output;
  const json from_log_json = parse(from_log);
  EXPECT_EQ(from_log_json["compared_with"], "plan");
  EXPECT_EQ(from_log_json["plan"]["kv"]["mib"], 2.12);
  EXPECT_EQ(from_log_json["plan"]["recurrent"]["mib"], 0.22);
  EXPECT_GE(from_log_json["settings_from_log"].size(), 5u) << from_log.output;
  // Asking for more than the server got is still a finding.
  Ran more = kvgate({"doctor", "--log", fixture("pinned_qwen35_np2_q8_0_lv4.log"), "--model", tiny.string(), "--ctx",
                     "8192"});
  EXPECT_EQ(more.code, 1) << more.output;
  std::filesystem::remove(tiny);

  Ran capped = kvgate({"doctor", "--log", fixture("mainline_capped_by_training_context.log")});
  EXPECT_EQ(capped.code, 0) << "a warning, not an error";
  EXPECT_NE(capped.output.find("slot_capped_by_training_context"), std::string::npos);
}

}  // namespace
}  // namespace kvgate::cli
