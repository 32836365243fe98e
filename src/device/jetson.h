// Reading a Jetson board under a Tree: identity and release (jetson.cc), power mode
// (nvpmodel), and clocks and temperatures (jetson_clocks.cc). Internal to kvgate_device.
//
// Where each path comes from is listed in tests/fixtures/device/README.md.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "device/facts.h"
#include "device/tree.h"

namespace kvgate::device {

// /etc/nv_tegra_release exists, or the device tree's compatible names an NVIDIA Tegra SoC.
bool looks_like_jetson(const Tree& tree);

struct JetsonReading {
  Jetson jetson;
  Gpu gpu;  // the integrated GPU: name and compute capability from the SoC, clocks from devfreq
};
// REQUIRES: looks_like_jetson(tree). Memory fields of `gpu` are left to the caller.
JetsonReading read_jetson(const Tree& tree, std::vector<std::string>& notes);

// "# R36 (release), REVISION: 4.3, GCID: ..." → {"R36 (release), REVISION: 4.3", "36.4.3"}.
struct L4tRelease {
  std::string release;
  std::string version;
};
std::optional<L4tRelease> parse_l4t_release(std::string_view first_line);
// "36.4.3" → "6.2"; empty for releases not in the table.
std::string jetpack_for_l4t(std::string_view version);

struct PowerModel {
  uint32_t id = 0;
  std::string name;
};
// The `< POWER_MODEL ID=n NAME=X >` lines of an nvpmodel.conf, in order.
std::vector<PowerModel> parse_power_models(std::string_view conf);
// "pmode:0002 fmode:quiet" → 2.
std::optional<uint32_t> parse_pmode(std::string_view status);

// jetson_clocks.cc: CPU cpufreq, GPU devfreq, EMC, thermal zones; sets clocks_locked.
void read_jetson_clocks(const Tree& tree, Jetson& jetson, Gpu& gpu, std::vector<std::string>& notes);

}  // namespace kvgate::device
