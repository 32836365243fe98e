// The device readers over the fixture trees in tests/fixtures/device/ (copied from real
// boards' layouts, see its README): every expected value below is the one written in those
// files, converted (kB → bytes, kHz → Hz, millidegrees → °C).
#include "device/facts.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <unistd.h>

#include "device/jetson.h"
#include "device/tree.h"
#include "testing/paths.h"

namespace kvgate::device {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * 1024;

fs::path fixture(const std::string& name) {
  return fs::path(kvgate::testing::source_dir()) / "tests/fixtures/device" / name;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

const Check* find_check(const Facts& f, std::string_view name) {
  for (const Check& c : f.checks) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

Level level_of(const Facts& f, std::string_view name) {
  const Check* c = find_check(f, name);
  EXPECT_NE(c, nullptr) << name;
  return c ? c->level : Level::kInfo;
}

bool has_note(const Facts& f, std::string_view part) {
  for (const std::string& n : f.notes) {
    if (n.find(part) != std::string::npos) return true;
  }
  return false;
}

// A scratch copy of a fixture tree (or an empty one) to take files away from.
class ScratchTree {
 public:
  explicit ScratchTree(const std::string& from = "") {
    dir_ = fs::temp_directory_path() /
           ("kvgate_device_" + std::to_string(::getpid()) + "_" + std::to_string(next_++));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    if (!from.empty()) fs::copy(fixture(from), dir_, fs::copy_options::recursive);
  }
  ~ScratchTree() { fs::remove_all(dir_); }
  const fs::path& path() const { return dir_; }
  void write(const std::string& rel, const std::string& text) const {
    fs::create_directories((dir_ / rel).parent_path());
    std::ofstream(dir_ / rel, std::ios::binary) << text;
  }
  void remove(const std::string& rel) const { fs::remove_all(dir_ / rel); }

 private:
  static inline int next_ = 0;
  fs::path dir_;
};

TEST(DeviceFacts, OrinLockedAndCool) {
  const Facts f = read_facts(fixture("orin-agx-32g"), std::nullopt);
  EXPECT_EQ(f.arch, "aarch64");
  EXPECT_EQ(f.mem_total, 30697412 * kKiB);
  EXPECT_EQ(f.mem_available, 28633920 * kKiB);
  EXPECT_TRUE(f.unified_memory);
  ASSERT_TRUE(f.jetson);
  const Jetson& j = *f.jetson;
  EXPECT_EQ(j.model, "NVIDIA Jetson AGX Orin Developer Kit");
  EXPECT_EQ(j.l4t_release, "R36 (release), REVISION: 4.3");
  EXPECT_EQ(j.l4t_version, "36.4.3");
  EXPECT_EQ(j.jetpack, "6.2");
  EXPECT_EQ(j.soc, "orin");
  EXPECT_EQ(j.compatible, "nvidia,tegra234");
  EXPECT_EQ(j.power_mode, "MAXN");
  EXPECT_EQ(j.power_mode_id, 0u);
  EXPECT_EQ(j.max_power_mode, "MAXN");
  EXPECT_EQ(j.clocks_locked, true);
  EXPECT_EQ(j.cpus_online, 8u);
  EXPECT_EQ(j.cpu_freq_cur, 2188800000u);
  EXPECT_EQ(j.cpu_freq_max, 2188800000u);
  EXPECT_EQ(j.emc_freq_cur, 3199000000u);
  EXPECT_EQ(j.emc_freq_max, 3199000000u);
  EXPECT_EQ(j.emc_locked, true);
  EXPECT_DOUBLE_EQ(j.temp_max_c, 46.031);
  EXPECT_EQ(j.temp_max_zone, "tj-thermal");
  EXPECT_DOUBLE_EQ(j.temp_throttle_c, 99.0);
  ASSERT_EQ(f.gpus.size(), 1u);
  EXPECT_EQ(f.gpus[0].name, "Orin (nvgpu)");
  EXPECT_EQ(f.gpus[0].compute_capability, "8.7");
  EXPECT_EQ(f.gpus[0].freq_cur, 930750000u);
  EXPECT_EQ(f.gpus[0].freq_max, 930750000u);
  EXPECT_EQ(f.gpus[0].memory_total, f.mem_total);
  EXPECT_EQ(f.cuda_arch(), "87");
  EXPECT_EQ(f.default_budget(), 28633920 * kKiB);
  for (const char* name :
       {"power mode", "clocks", "CPU clock", "GPU clock", "EMC clock", "temperature", "memory"}) {
    EXPECT_EQ(level_of(f, name), Level::kOk) << name << ": " << find_check(f, name)->detail;
  }
  EXPECT_FALSE(f.has_warnings());
  EXPECT_TRUE(f.notes.empty()) << f.notes.front();
}

TEST(DeviceFacts, OrinUnlockedHotIn15W) {
  const Facts f = read_facts(fixture("orin-agx-32g-unlocked-hot"), std::nullopt);
  ASSERT_TRUE(f.jetson);
  const Jetson& j = *f.jetson;
  EXPECT_EQ(j.power_mode, "MODE_15W");
  EXPECT_EQ(j.power_mode_id, 1u);
  EXPECT_EQ(j.clocks_locked, false);
  EXPECT_EQ(j.cpus_online, 4u);
  EXPECT_EQ(j.cpu_freq_cur, 729600000u);
  EXPECT_EQ(j.cpu_freq_min, 115200000u);
  EXPECT_EQ(j.cpu_freq_max, 1113600000u);
  EXPECT_EQ(j.cpu_freq_hw_max, 2188800000u);
  EXPECT_EQ(f.gpus[0].freq_cur, 306000000u);
  EXPECT_EQ(f.gpus[0].freq_max, 408000000u);
  EXPECT_EQ(j.gpu_freq_hw_max, 930750000u);
  EXPECT_EQ(j.emc_freq_cur, 2133000000u);
  EXPECT_EQ(j.emc_freq_max, 2133000000u) << "capped by nvpmodel_emc_cap";
  EXPECT_EQ(j.emc_freq_hw_max, 3199000000u);
  EXPECT_EQ(j.emc_locked, false);
  EXPECT_DOUBLE_EQ(j.temp_max_c, 95.718);
  EXPECT_EQ(j.temp_max_zone, "gpu-thermal");
  EXPECT_EQ(f.default_budget(), 11604548 * kKiB);
  for (const char* name : {"power mode", "clocks", "CPU clock", "GPU clock", "EMC clock", "temperature"}) {
    EXPECT_EQ(level_of(f, name), Level::kWarn) << name << ": " << find_check(f, name)->detail;
  }
  EXPECT_NE(find_check(f, "power mode")->detail.find("sudo nvpmodel -m 0"), std::string::npos);
  EXPECT_NE(find_check(f, "clocks")->detail.find("CPU, GPU, EMC"), std::string::npos);
  EXPECT_NE(find_check(f, "temperature")->detail.find("within 10"), std::string::npos);
  EXPECT_EQ(level_of(f, "memory"), Level::kOk);
  EXPECT_TRUE(f.has_warnings());
}

TEST(DeviceFacts, ThorLockedAndCool) {
  const Facts f = read_facts(fixture("thor-agx"), std::nullopt);
  ASSERT_TRUE(f.jetson);
  const Jetson& j = *f.jetson;
  EXPECT_EQ(j.model, "NVIDIA Jetson AGX Thor Developer Kit");
  EXPECT_EQ(j.l4t_version, "38.2.0");
  EXPECT_EQ(j.jetpack, "7.0");
  EXPECT_EQ(j.soc, "thor");
  EXPECT_EQ(j.compatible, "nvidia,tegra264");
  EXPECT_EQ(j.power_mode, "MAXN");
  EXPECT_EQ(j.clocks_locked, true);
  EXPECT_EQ(j.cpus_online, 14u);
  EXPECT_EQ(j.cpu_freq_cur, 2601000000u);
  EXPECT_EQ(f.gpus[0].name, "NVIDIA Thor");
  EXPECT_EQ(f.gpus[0].compute_capability, "11.0");
  EXPECT_EQ(f.gpus[0].freq_cur, 1575000000u);
  EXPECT_EQ(j.emc_freq_cur, 4266000000u);
  EXPECT_EQ(j.emc_locked, true);
  EXPECT_DOUBLE_EQ(j.temp_max_c, 42.875);
  EXPECT_EQ(f.mem_total, 128790528 * kKiB);
  EXPECT_EQ(f.cuda_arch(), "110");
  EXPECT_EQ(f.default_budget(), 121870232 * kKiB);
  EXPECT_FALSE(f.has_warnings());
  EXPECT_TRUE(f.notes.empty()) << f.notes.front();
}

TEST(DeviceFacts, ThorUnlockedHotAboveTheThrottlePoint) {
  const Facts f = read_facts(fixture("thor-agx-unlocked-hot"), std::nullopt);
  ASSERT_TRUE(f.jetson);
  const Jetson& j = *f.jetson;
  EXPECT_EQ(j.l4t_version, "38.4.0");
  EXPECT_EQ(j.jetpack, "7.1");
  EXPECT_EQ(j.power_mode, "40W");
  EXPECT_EQ(j.power_mode_id, 4u);
  EXPECT_EQ(j.clocks_locked, false);
  EXPECT_EQ(j.cpu_freq_cur, 972000000u);
  EXPECT_EQ(j.cpu_freq_max, 1998000000u);
  EXPECT_EQ(f.gpus[0].freq_cur, 315000000u);
  EXPECT_EQ(f.gpus[0].freq_max, 693000000u);
  EXPECT_EQ(j.emc_freq_cur, 2750000000u);
  EXPECT_EQ(j.emc_freq_max, 4266000000u);
  EXPECT_DOUBLE_EQ(j.temp_max_c, 101.218);
  EXPECT_EQ(f.default_budget(), 53518044 * kKiB);
  for (const char* name : {"power mode", "clocks", "CPU clock", "GPU clock", "EMC clock", "temperature"}) {
    EXPECT_EQ(level_of(f, name), Level::kWarn) << name;
  }
  EXPECT_NE(find_check(f, "temperature")->detail.find("at or above"), std::string::npos);
}

TEST(DeviceFacts, PcWithAnRtx4070) {
  const Facts f = read_facts(fixture("x86-rtx4070"), slurp(fixture("x86-rtx4070") / "nvidia-smi.csv"));
  EXPECT_EQ(f.arch, "x86_64");
  EXPECT_FALSE(f.unified_memory);
  EXPECT_FALSE(f.jetson);
  ASSERT_EQ(f.gpus.size(), 1u);
  EXPECT_EQ(f.gpus[0].name, "NVIDIA GeForce RTX 4070");
  EXPECT_EQ(f.gpus[0].compute_capability, "8.9");
  EXPECT_EQ(f.gpus[0].memory_total, 12282 * kMiB);
  EXPECT_EQ(f.gpus[0].memory_free, 11563 * kMiB);
  EXPECT_EQ(f.gpus[0].freq_cur, 210000000u);
  EXPECT_EQ(f.gpus[0].freq_max, 3105000000u);
  EXPECT_EQ(f.mem_available, 58123400 * kKiB);
  EXPECT_EQ(f.cuda_arch(), "89");
  EXPECT_EQ(f.default_budget(), 11563 * kMiB);
  EXPECT_EQ(level_of(f, "GPU"), Level::kOk);
  EXPECT_FALSE(f.has_warnings());
}

TEST(DeviceFacts, CpuOnlyIsNotAnError) {
  for (const char* name : {"x86-cpu", "x86-rtx4070"}) {  // the PC without its nvidia-smi text: CPU-only
    const Facts f = read_facts(fixture(name), std::nullopt);
    EXPECT_TRUE(f.gpus.empty()) << name;
    EXPECT_EQ(f.cuda_arch(), "");
    EXPECT_EQ(f.default_budget(), std::nullopt);
    EXPECT_NE(find_check(f, "GPU")->detail.find("no NVIDIA GPU found: CPU-only"), std::string::npos);
    EXPECT_FALSE(f.has_warnings());
    EXPECT_TRUE(f.notes.empty());
  }
  const Facts cpu = read_facts(fixture("x86-cpu"), std::nullopt);
  EXPECT_EQ(cpu.mem_total, 16303048 * kKiB);
  EXPECT_EQ(cpu.mem_available, 13484120 * kKiB);
  EXPECT_NE(cpu.summary().find("no NVIDIA GPU found: CPU-only"), std::string::npos) << cpu.summary();
}

TEST(NvidiaSmi, FieldsNotAvailableAreUnknown) {
  std::vector<std::string> notes;
  auto gpus = parse_nvidia_smi("NVIDIA Thor, 11.0, [N/A], [N/A], [N/A], [Not Supported]\n", notes);
  ASSERT_EQ(gpus.size(), 1u);
  EXPECT_EQ(gpus[0].compute_capability, "11.0");
  EXPECT_EQ(gpus[0].memory_total, 0u);
  EXPECT_EQ(gpus[0].freq_max, 0u);
  EXPECT_TRUE(notes.empty());
  gpus = parse_nvidia_smi("Tesla K80, [N/A], 11441, 11380, 324, 875\n", notes);
  ASSERT_EQ(gpus.size(), 1u);
  EXPECT_EQ(gpus[0].compute_capability, "");
  EXPECT_EQ(gpus[0].memory_free, 11380 * kMiB);
}

TEST(NvidiaSmi, SeveralGpus) {
  std::vector<std::string> notes;
  Facts f;
  f.gpus = parse_nvidia_smi(
      "NVIDIA GeForce RTX 3090, 8.6, 24576, 24161, 0, 2100\r\n"
      "NVIDIA GeForce RTX 4090, 8.9, 24564, 23800, 210, 3120\r\n"
      "NVIDIA GeForce RTX 4090, 8.9, 24564, 24000, 210, 3120\r\n\n",
      notes);
  EXPECT_TRUE(notes.empty());
  ASSERT_EQ(f.gpus.size(), 3u);
  EXPECT_EQ(f.gpus[1].memory_free, 23800 * kMiB);
  EXPECT_EQ(f.cuda_arch(), "86;89");
  EXPECT_EQ(f.default_budget(), std::nullopt) << "several GPUs: no single budget";
}

TEST(NvidiaSmi, GarbageIsANoteNotACrash) {
  std::vector<std::string> notes;
  auto gpus = parse_nvidia_smi(
      "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the "
      "latest "
      "NVIDIA driver is installed and running.\n"
      "NVIDIA GeForce RTX 4070, 8.9, lots, 11563, 210, 3105\n"
      "NVIDIA GeForce RTX 4070, eight, 12282, 11563, 210, 3105\n"
      "NVIDIA GeForce RTX 4070, 8.9, 99999999999999999999999, 1, 1, 1\n"
      "a, b\n"
      "NVIDIA GeForce RTX 4070, 8.9, 12282, 11563, 210, 3105\n",
      notes);
  ASSERT_EQ(gpus.size(), 1u);
  EXPECT_EQ(gpus[0].memory_total, 12282 * kMiB);
  ASSERT_EQ(notes.size(), 5u);
  EXPECT_NE(notes[0].find("line 1 not understood"), std::string::npos) << notes[0];
  EXPECT_TRUE(parse_nvidia_smi("", notes).empty());
}

TEST(NvidiaSmi, EveryTruncationOfALineParsesOrIsNoted) {
  const std::string line = "NVIDIA GeForce RTX 4070, 8.9, 12282, 11563, 210, 3105";
  for (size_t n = 0; n <= line.size(); ++n) {
    std::vector<std::string> notes;
    const auto gpus = parse_nvidia_smi(line.substr(0, n), notes);
    EXPECT_EQ(gpus.size() + notes.size(), n == 0 ? 0u : 1u) << n;
  }
}

TEST(DeviceParsers, L4tRelease) {
  auto r = parse_l4t_release("# R36 (release), REVISION: 4.3, GCID: 38968081, BOARD: generic, EABI: aarch64");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->release, "R36 (release), REVISION: 4.3");
  EXPECT_EQ(r->version, "36.4.3");
  EXPECT_EQ(parse_l4t_release("# R38 (release), REVISION: 2.0, GCID: 41844464")->version, "38.2.0");
  EXPECT_EQ(parse_l4t_release("# R32 (release), REVISION: 7, GCID: 1")->version, "32.7.0");
  for (const char* bad :
       {"", "#", "R36", "# R36 (release)", "# Rxx (release), REVISION: 4.3", "# R36, REVISION: a.b",
        "# R36 (release), VERSION: 4.3", "# R36 (release), REVISION: 4.3.2.1"}) {
    EXPECT_FALSE(parse_l4t_release(bad)) << bad;
  }
  EXPECT_EQ(jetpack_for_l4t("36.4.3"), "6.2");
  EXPECT_EQ(jetpack_for_l4t("38.4.0"), "7.1");
  EXPECT_EQ(jetpack_for_l4t("99.0.0"), "");
}

TEST(DeviceParsers, NvpmodelStatusAndConf) {
  EXPECT_EQ(parse_pmode("pmode:0000\n"), 0u);
  EXPECT_EQ(parse_pmode("pmode:0002 fmode:quiet"), 2u);
  EXPECT_EQ(parse_pmode("pmode:"), std::nullopt);
  EXPECT_EQ(parse_pmode("mode 2"), std::nullopt);
  EXPECT_EQ(parse_pmode("pmode:99999999999"), std::nullopt);
  const auto models = parse_power_models(slurp(fixture("orin-agx-32g") / "etc/nvpmodel.conf"));
  ASSERT_EQ(models.size(), 4u);
  EXPECT_EQ(models[1].id, 1u);
  EXPECT_EQ(models[1].name, "MODE_15W");
  EXPECT_TRUE(parse_power_models("< POWER_MODEL ID=x NAME=A >\n< POWER_MODEL NAME=B >\n<PM_CONFIG DEFAULT=0>")
                  .empty());
}

TEST(DeviceParsers, CpuLists) {
  EXPECT_EQ(parse_cpu_list("0-3,6,8-9\n"), (std::vector<uint32_t>{0, 1, 2, 3, 6, 8, 9}));
  EXPECT_EQ(parse_cpu_list(""), std::vector<uint32_t>{});
  for (const char* bad : {"3-1", "a", "0-", "-1", "0,,1", "0-99999"})
    EXPECT_FALSE(parse_cpu_list(bad)) << bad;
}

TEST(DeviceFacts, MissingFilesAreNotes) {
  const ScratchTree empty;
  const Facts none = read_facts(empty.path(), std::nullopt);
  EXPECT_EQ(none.arch, "");
  EXPECT_EQ(none.mem_total, 0u);
  EXPECT_TRUE(has_note(none, "/proc/meminfo"));
  EXPECT_EQ(level_of(none, "memory"), Level::kInfo);

  const ScratchTree bare;
  bare.write("etc/nv_tegra_release", "not a release line\n");
  const Facts jetson = read_facts(bare.path(), std::nullopt);
  ASSERT_TRUE(jetson.jetson);
  EXPECT_EQ(jetson.jetson->clocks_locked, std::nullopt);
  for (const char* part : {"device-tree/model", "first line not understood", "nvpmodel/status", "cpu/online",
                           "devfreq", "EMC clock not readable", "thermal zone"}) {
    EXPECT_TRUE(has_note(jetson, part)) << part;
  }
  EXPECT_EQ(level_of(jetson, "clocks"), Level::kInfo);
  EXPECT_EQ(level_of(jetson, "power mode"), Level::kInfo);
  EXPECT_EQ(jetson.cuda_arch(), "");
}

TEST(DeviceFacts, WithoutRootTheEmcIsANoteAndTheLockIsJudgedOnTheRest) {
  const ScratchTree t("orin-agx-32g");
  t.remove("sys/kernel/debug");
  const Facts f = read_facts(t.path(), std::nullopt);
  EXPECT_TRUE(has_note(f, "needs root"));
  EXPECT_EQ(f.jetson->clocks_locked, true);
  EXPECT_EQ(level_of(f, "EMC clock"), Level::kInfo);
  EXPECT_NE(find_check(f, "clocks")->detail.find("EMC not readable"), std::string::npos);
}

TEST(DeviceFacts, OfflineSensorsAndJetPack7NvidiaSmi) {
  const ScratchTree t("thor-agx");
  t.write("sys/class/thermal/thermal_zone0/temp", "-256000\n");
  const Facts f = read_facts(t.path(), "NVIDIA Thor, 11.0, [N/A], [N/A], 1575, 1575\n");
  EXPECT_DOUBLE_EQ(f.jetson->temp_max_c, 42.875) << "the offline sensor is skipped";
  ASSERT_EQ(f.gpus.size(), 1u) << "nvidia-smi names the integrated GPU, not a second one";
  EXPECT_EQ(f.gpus[0].memory_total, 128790528 * kKiB);
  EXPECT_EQ(f.cuda_arch(), "110");
}

TEST(DeviceReport, SaysEveryCheckAndTheBudget) {
  const std::string orin = format_report(read_facts(fixture("orin-agx-32g"), std::nullopt));
  EXPECT_NE(orin.find("ok    power mode   MAXN (id 0), the fastest mode"), std::string::npos) << orin;
  EXPECT_NE(orin.find("memory budget: 27.31 GiB by default (MemAvailable"), std::string::npos) << orin;
  const std::string cpu = format_report(read_facts(fixture("x86-cpu"), std::nullopt));
  EXPECT_NE(cpu.find("no NVIDIA GPU found: CPU-only"), std::string::npos) << cpu;
  EXPECT_EQ(level_name(Level::kWarn), "warn");
}

}  // namespace
}  // namespace kvgate::device
