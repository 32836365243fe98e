// Clocks and temperatures of a Jetson: what `jetson_clocks --show` and tegrastats read.
//
// CPU: cpufreq per online core (kHz). jetson_clocks raises scaling_min_freq to
// scaling_max_freq on every core, so "locked" is min == max; the ceiling itself is what the
// nvpmodel mode allows (cpuinfo_max_freq is the hardware's).
// GPU: the devfreq node of the integrated GPU (Hz): gpu-gpc-0 on Thor, otherwise the node
// whose device-tree name is the GPU's (17000000.gpu on Orin with JetPack 6, 17000000.ga10b
// with JetPack 5). jetson_clocks sets min_freq = max_freq; available_frequencies ends with the
// hardware's fastest step.
// EMC: BPMP debugfs on Orin (rate, max_rate, mrq_rate_locked — root only), devfreq bwmgr on
// Thor; the nvpmodel cap (nvpmodel_emc_cap/emc_iso_cap) lowers the maximum.
// Thermal: every thermal zone's temp (millidegrees; offline sensors read -256000) and its
// passive/hot trip points, where software throttling starts.
#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "device/jetson.h"

namespace kvgate::device {
namespace {

constexpr uint64_t kKHz = 1000;

void read_cpus(const Tree& tree, Jetson& j, std::vector<std::string>& notes, std::optional<bool>& locked) {
  auto online_text = tree.line("sys/devices/system/cpu/online");
  auto online = online_text ? parse_cpu_list(*online_text) : std::nullopt;
  if (!online || online->empty()) {
    notes.push_back("/sys/devices/system/cpu/online not readable: CPU clocks unknown");
    return;
  }
  bool all_locked = true;
  for (uint32_t cpu : *online) {
    const std::string dir = fmt::format("sys/devices/system/cpu/cpu{}/cpufreq/", cpu);
    auto cur = tree.number(dir + "scaling_cur_freq");
    auto min = tree.number(dir + "scaling_min_freq");
    auto max = tree.number(dir + "scaling_max_freq");
    if (!cur || !min || !max) {
      notes.push_back(fmt::format("cpu{}: cpufreq not readable", cpu));
      return;
    }
    ++j.cpus_online;
    const uint64_t hw = tree.number(dir + "cpuinfo_max_freq").value_or(*max);
    j.cpu_freq_cur = j.cpus_online == 1 ? *cur * kKHz : std::min(j.cpu_freq_cur, *cur * kKHz);
    j.cpu_freq_min = j.cpus_online == 1 ? *min * kKHz : std::min(j.cpu_freq_min, *min * kKHz);
    j.cpu_freq_max = std::max(j.cpu_freq_max, *max * kKHz);
    j.cpu_freq_hw_max = std::max(j.cpu_freq_hw_max, hw * kKHz);
    all_locked = all_locked && *min >= *max;
  }
  locked = all_locked;
}

// The GPU's devfreq directory, or empty.
std::string gpu_devfreq(const Tree& tree) {
  if (tree.exists("sys/class/devfreq/gpu-gpc-0")) return "sys/class/devfreq/gpu-gpc-0";
  constexpr std::array<std::string_view, 5> kNames = {"gpu", "ga10b", "gb10b", "gv11b", "gp10b"};
  for (const std::string& entry : tree.list("sys/class/devfreq")) {
    const std::string dir = "sys/class/devfreq/" + entry;
    auto name = tree.line(dir + "/device/of_node/name");
    if (name && std::find(kNames.begin(), kNames.end(), *name) != kNames.end()) return dir;
  }
  return "";
}

void read_gpu(const Tree& tree, Jetson& j, Gpu& gpu, std::vector<std::string>& notes,
              std::optional<bool>& locked) {
  const std::string dir = gpu_devfreq(tree);
  if (dir.empty()) {
    notes.push_back("no GPU devfreq node under /sys/class/devfreq: GPU clock unknown");
    return;
  }
  auto cur = tree.number(dir + "/cur_freq");
  auto min = tree.number(dir + "/min_freq");
  auto max = tree.number(dir + "/max_freq");
  if (!cur || !min || !max) {
    notes.push_back(fmt::format("/{}: cur_freq/min_freq/max_freq not readable", dir));
    return;
  }
  gpu.freq_cur = *cur;
  gpu.freq_max = *max;
  j.gpu_freq_min = *min;
  j.gpu_freq_hw_max = *max;
  const std::string steps = tree.line(dir + "/available_frequencies").value_or("");
  for (std::string_view step : split(steps, ' ')) {
    if (auto hz = parse_u64(trim(step))) j.gpu_freq_hw_max = std::max(j.gpu_freq_hw_max, *hz);
  }
  locked = *min >= *max && *cur >= *max;
}

void read_emc(const Tree& tree, Jetson& j, std::vector<std::string>& notes) {
  const std::string bpmp = "sys/kernel/debug/bpmp/debug/clk/emc/";
  const std::string bwmgr = "sys/class/devfreq/bwmgr/";
  if (auto rate = tree.number(bpmp + "rate")) {
    j.emc_freq_cur = *rate;
    j.emc_freq_max = tree.number(bpmp + "max_rate").value_or(0);
    auto pinned = tree.number(bpmp + "mrq_rate_locked");
    if (pinned) j.emc_locked = *pinned == 1 && j.emc_freq_cur >= j.emc_freq_max;
  } else if (auto cur = tree.number(bwmgr + "cur_freq")) {
    j.emc_freq_cur = *cur;
    j.emc_freq_max = tree.number(bwmgr + "max_freq").value_or(0);
    auto min = tree.number(bwmgr + "min_freq");
    if (min) j.emc_locked = *min >= j.emc_freq_max && j.emc_freq_cur >= j.emc_freq_max;
  } else {
    notes.push_back(
        "EMC clock not readable (/sys/kernel/debug/bpmp needs root; no /sys/class/devfreq/bwmgr): "
        "run kvgate doctor with sudo to check it");
    return;
  }
  j.emc_freq_hw_max = j.emc_freq_max;
  const uint64_t cap = tree.number("sys/kernel/nvpmodel_emc_cap/emc_iso_cap").value_or(0);
  if (cap > 0 && (j.emc_freq_max == 0 || cap < j.emc_freq_max)) j.emc_freq_max = cap;
}

void read_thermal(const Tree& tree, Jetson& j, std::vector<std::string>& notes) {
  constexpr int64_t kOffline = -40000;  // below -40 °C: a sensor that is off (-256000)
  constexpr int64_t kImplausible = 200000;
  bool any = false;
  for (const std::string& entry : tree.list("sys/class/thermal")) {
    if (!entry.starts_with("thermal_zone")) continue;
    const std::string dir = "sys/class/thermal/" + entry + "/";
    auto temp = tree.signed_number(dir + "temp");
    if (!temp || *temp <= kOffline || *temp >= kImplausible) continue;
    const double c = static_cast<double>(*temp) / 1000.0;
    if (!any || c > j.temp_max_c) {
      j.temp_max_c = c;
      j.temp_max_zone = tree.line(dir + "type").value_or(entry);
    }
    any = true;
    for (int trip = 0; trip < 16; ++trip) {
      auto type = tree.line(dir + fmt::format("trip_point_{}_type", trip));
      if (!type) break;
      auto at = tree.signed_number(dir + fmt::format("trip_point_{}_temp", trip));
      if (!at || *at <= 0 || *at >= kImplausible || (*type != "passive" && *type != "hot")) continue;
      const double trip_c = static_cast<double>(*at) / 1000.0;
      if (j.temp_throttle_c == 0 || trip_c < j.temp_throttle_c) j.temp_throttle_c = trip_c;
    }
  }
  if (!any)
    notes.push_back("no readable thermal zone under /sys/class/thermal: temperature unknown");
  else if (j.temp_throttle_c == 0)
    notes.push_back("no passive trip point in the thermal zones: throttle point unknown");
}

}  // namespace

void read_jetson_clocks(const Tree& tree, Jetson& j, Gpu& gpu, std::vector<std::string>& notes) {
  std::optional<bool> cpu_locked, gpu_locked;
  read_cpus(tree, j, notes, cpu_locked);
  read_gpu(tree, j, gpu, notes, gpu_locked);
  read_emc(tree, j, notes);
  read_thermal(tree, j, notes);
  // Locked when every part that could be read is; unknown when none could.
  std::optional<bool> locked;
  for (const std::optional<bool>& part : {cpu_locked, gpu_locked, j.emc_locked}) {
    if (part) locked = locked.value_or(true) && *part;
  }
  j.clocks_locked = locked;
}

}  // namespace kvgate::device
