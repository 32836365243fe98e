// `kvgate doctor` as a user runs it for the device report: the built binary on the fixture
// trees of tests/fixtures/device/ (an Orin and a Thor, locked and cool or not, a PC with an
// RTX 4070, a CPU-only PC) and on this machine. Expected values are the fixture files'.

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "testing/cli_test_support.h"
#include "testing/paths.h"

namespace kvgate::cli {
namespace {

using testing::Ran;

using nlohmann::json;

Ran kvgate(const std::vector<std::string>& args) { return testing::run_kvgate(args); }

std::string tree(const std::string& name) {
  return std::string(kvgate::testing::source_dir()) + "/tests/fixtures/device/" + name;
}
std::string log_fixture(const std::string& name) {
  return std::string(kvgate::testing::source_dir()) + "/tests/fixtures/logs/" + name;
}

bool has(const Ran& r, std::string_view text) { return r.output.find(text) != std::string::npos; }

TEST(DoctorDevice, OrinLockedAndCool) {
  Ran r = kvgate({"doctor", "--device-root", tree("orin-agx-32g")});
  EXPECT_EQ(r.code, 0) << r.output;
  for (const char* line :
       {"info  board        NVIDIA Jetson AGX Orin Developer Kit (orin, nvidia,tegra234), L4T 36.4.3, "
        "JetPack 6.2",
        "ok    power mode   MAXN (id 0), the fastest mode",
        "ok    clocks       locked: CPU, GPU and EMC held at their maximum (jetson_clocks)",
        "ok    GPU clock    930.75 MHz of 930.75 MHz", "ok    EMC clock    3199 MHz of 3199 MHz",
        "ok    temperature  hottest tj-thermal 46.0 °C, throttling starts at 99.0 °C",
        "memory budget: 27.31 GiB by default (MemAvailable, shared by CPU and GPU)"}) {
    EXPECT_TRUE(has(r, line)) << line << "\n" << r.output;
  }
  EXPECT_FALSE(has(r, "warn")) << r.output;
}

TEST(DoctorDevice, UnlockedAndHotBoardsWarnButDoNotFail) {
  Ran orin = kvgate({"doctor", "--device-root", tree("orin-agx-32g-unlocked-hot")});
  EXPECT_EQ(orin.code, 0) << "warnings do not fail the command\n" << orin.output;
  EXPECT_TRUE(has(orin, "warn  power mode   MODE_15W (id 1), not MAXN: sudo nvpmodel -m 0")) << orin.output;
  EXPECT_TRUE(has(orin, "warn  clocks       not locked: CPU, GPU, EMC scale with load: sudo jetson_clocks"))
      << orin.output;
  EXPECT_TRUE(
      has(orin, "warn  temperature  hottest gpu-thermal 95.7 °C, within 10 °C of the throttle point 99.0 °C"))
      << orin.output;
  Ran thor = kvgate({"doctor", "--device-root", tree("thor-agx-unlocked-hot")});
  EXPECT_EQ(thor.code, 0) << thor.output;
  EXPECT_TRUE(has(thor, "warn  power mode   40W (id 4), not MAXN: sudo nvpmodel -m 0")) << thor.output;
  EXPECT_TRUE(has(
      thor, "warn  GPU clock    315 MHz of 693 MHz (the power mode caps it below the hardware's 1575 MHz)"))
      << thor.output;
  EXPECT_TRUE(has(thor, "at or above the throttle point 99.0 °C")) << thor.output;
  Ran cool = kvgate({"doctor", "--device-root", tree("thor-agx")});
  EXPECT_EQ(cool.code, 0);
  EXPECT_TRUE(has(cool, "JetPack 7.0")) << cool.output;
  EXPECT_FALSE(has(cool, "warn")) << cool.output;
}

TEST(DoctorDevice, JsonCarriesTheDevice) {
  Ran r = kvgate({"doctor", "--device-root", tree("thor-agx-unlocked-hot"), "--json"});
  ASSERT_EQ(r.code, 0) << r.output;
  const json j = json::parse(r.output);
  const json& d = j["device"];
  EXPECT_EQ(d["cuda_arch"], "110");
  EXPECT_EQ(d["unified_memory"], true);
  EXPECT_EQ(d["default_budget"], 53518044ull * 1024);
  EXPECT_EQ(d["jetson"]["jetpack"], "7.1");
  EXPECT_EQ(d["jetson"]["power_mode"], "40W");
  EXPECT_EQ(d["jetson"]["clocks_locked"], false);
  EXPECT_EQ(d["gpus"][0]["name"], "NVIDIA Thor");
  bool temperature_warns = false;
  for (const json& c : d["checks"]) temperature_warns |= c["name"] == "temperature" && c["level"] == "warn";
  EXPECT_TRUE(temperature_warns) << d["checks"].dump(2);
}

TEST(DoctorDevice, PcWithNvidiaSmiAndCpuOnly) {
  Ran pc = kvgate({"doctor", "--device-root", tree("x86-rtx4070"), "--nvidia-smi-output",
                   tree("x86-rtx4070") + "/nvidia-smi.csv", "--json"});
  ASSERT_EQ(pc.code, 0) << pc.output;
  const json d = json::parse(pc.output)["device"];
  EXPECT_EQ(d["gpus"][0]["name"], "NVIDIA GeForce RTX 4070");
  EXPECT_EQ(d["gpus"][0]["memory_free"], 11563ull << 20);
  EXPECT_EQ(d["cuda_arch"], "89");
  EXPECT_EQ(d["default_budget"], 11563ull << 20);
  EXPECT_EQ(d["jetson"], nullptr);
  Ran cpu = kvgate({"doctor", "--device-root", tree("x86-cpu")});
  EXPECT_EQ(cpu.code, 0) << cpu.output;
  EXPECT_TRUE(has(cpu, "no NVIDIA GPU found: CPU-only")) << cpu.output;
  EXPECT_TRUE(has(cpu, "memory budget: none by default")) << cpu.output;
}

TEST(DoctorDevice, ThisMachineIsNeverAnError) {
  Ran r = kvgate({"doctor"});
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r, "device\n")) << r.output;
  EXPECT_TRUE(has(r, "memory budget:")) << r.output;
}

TEST(DoctorDevice, WithALogTheDeviceComesFirstAndExitCodesStay) {
  Ran ok = kvgate({"doctor", "--device-root", tree("orin-agx-32g"), "--log",
                   log_fixture("mainline_capped_by_training_context.log")});
  EXPECT_EQ(ok.code, 0) << ok.output;
  const size_t device = ok.output.find("device\n");
  const size_t log = ok.output.find("\nlog ");
  EXPECT_EQ(device, 0u) << ok.output;
  EXPECT_NE(log, std::string::npos) << ok.output;
  Ran junk =
      kvgate({"doctor", "--device-root", tree("x86-cpu"), "--log", log_fixture("not_a_server_log.txt")});
  EXPECT_EQ(junk.code, 1) << junk.output;
  Ran json_log = kvgate({"doctor", "--device-root", tree("orin-agx-32g"), "--log",
                         log_fixture("mainline_capped_by_training_context.log"), "--json"});
  ASSERT_EQ(json_log.code, 0) << json_log.output;
  const json j = json::parse(json_log.output);
  EXPECT_EQ(j["device"]["jetson"]["l4t"], "36.4.3");
  EXPECT_TRUE(j.contains("facts"));
}

TEST(DoctorDevice, BadDeviceOptions) {
  EXPECT_EQ(kvgate({"doctor", "--device-root", "/nonexistent-kvgate-root"}).code, 2);
  Ran missing =
      kvgate({"doctor", "--device-root", tree("x86-cpu"), "--nvidia-smi-output", "/nonexistent.csv"});
  EXPECT_EQ(missing.code, 1);
  EXPECT_TRUE(has(missing, "cannot read /nonexistent.csv")) << missing.output;
}

}  // namespace
}  // namespace kvgate::cli
