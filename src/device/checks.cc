// The device report's verdicts. Thresholds: a clock below its ceiling, a power mode other
// than the conf's MAXN, a temperature within kThrottleMarginC of the first passive trip
// point, less than a tenth of the memory (a quarter of the VRAM) free are warnings; what
// could not be read is "info" and explained in the notes.
#include "device/checks.h"

#include <fmt/format.h>

#include "device/facts.h"
#include "util/units.h"

namespace kvgate::device {
namespace {

constexpr double kThrottleMarginC = 10.0;

void add(Facts& f, std::string name, Level level, std::string detail) {
  f.checks.push_back({.name = std::move(name), .level = level, .detail = std::move(detail)});
}

// "cur of max", with the power mode's cap against the hardware's when they differ.
void add_clock(Facts& f, std::string name, uint64_t cur, uint64_t max, uint64_t hw_max,
               std::string prefix = "") {
  std::string detail = prefix + fmt::format("{} of {}", mhz(cur), mhz(max));
  bool warn = cur < max;
  if (hw_max > max) {
    detail += fmt::format(" (the power mode caps it below the hardware's {})", mhz(hw_max));
    warn = true;
  }
  if (cur < max) detail += ": scaling with load, not locked at the maximum";
  add(f, std::move(name), warn ? Level::kWarn : Level::kOk, std::move(detail));
}

void add_power_mode(Facts& f, const Jetson& j) {
  if (!j.power_mode_id) {
    add(f, "power mode", Level::kInfo, "unknown (see notes)");
  } else if (!j.max_power_mode_id) {
    add(f, "power mode", Level::kInfo,
        fmt::format("{} (id {}); the nvpmodel conf names no MAXN mode", *j.power_mode, *j.power_mode_id));
  } else if (*j.power_mode_id == *j.max_power_mode_id) {
    add(f, "power mode", Level::kOk,
        fmt::format("{} (id {}), the fastest mode", *j.power_mode, *j.power_mode_id));
  } else {
    add(f, "power mode", Level::kWarn,
        fmt::format("{} (id {}), not {}: sudo nvpmodel -m {}", *j.power_mode, *j.power_mode_id,
                    *j.max_power_mode, *j.max_power_mode_id));
  }
}

void add_locked(Facts& f, const Jetson& j, const Gpu& gpu) {
  if (!j.clocks_locked) {
    add(f, "clocks", Level::kInfo, "unknown: neither CPU, GPU nor EMC clocks readable (see notes)");
    return;
  }
  if (*j.clocks_locked) {
    add(f, "clocks", Level::kOk,
        fmt::format("locked: CPU, GPU{} held at their maximum (jetson_clocks)",
                    j.emc_locked ? " and EMC" : " (EMC not readable)"));
    return;
  }
  std::string loose;
  auto part = [&loose](bool is_loose, std::string_view name) {
    if (is_loose) loose += fmt::format("{}{}", loose.empty() ? "" : ", ", name);
  };
  part(j.cpus_online > 0 && j.cpu_freq_min < j.cpu_freq_max, "CPU");
  part(gpu.freq_max > 0 && (j.gpu_freq_min < gpu.freq_max || gpu.freq_cur < gpu.freq_max), "GPU");
  part(j.emc_locked.has_value() && !*j.emc_locked, "EMC");
  add(f, "clocks", Level::kWarn, fmt::format("not locked: {} scale with load: sudo jetson_clocks", loose));
}

void add_temperature(Facts& f, const Jetson& j) {
  if (j.temp_max_zone.empty()) {
    add(f, "temperature", Level::kInfo, "unknown (see notes)");
    return;
  }
  const std::string now = fmt::format("hottest {} {:.1f} °C", j.temp_max_zone, j.temp_max_c);
  if (j.temp_throttle_c <= 0) {
    add(f, "temperature", Level::kInfo, now + "; throttle point unknown");
  } else if (j.temp_max_c >= j.temp_throttle_c) {
    add(f, "temperature", Level::kWarn,
        fmt::format(
            "{}, at or above the throttle point {:.1f} °C: clocks are being cut; check the fan and airflow",
            now, j.temp_throttle_c));
  } else if (j.temp_max_c >= j.temp_throttle_c - kThrottleMarginC) {
    add(f, "temperature", Level::kWarn,
        fmt::format("{}, within {:.0f} °C of the throttle point {:.1f} °C: check the fan and airflow", now,
                    kThrottleMarginC, j.temp_throttle_c));
  } else {
    add(f, "temperature", Level::kOk,
        fmt::format("{}, throttling starts at {:.1f} °C", now, j.temp_throttle_c));
  }
}

void add_memory(Facts& f, std::string_view what) {
  if (f.mem_total == 0) {
    add(f, "memory", Level::kInfo, "unknown (see notes)");
    return;
  }
  const bool low = f.mem_available < f.mem_total / 10;
  add(f, "memory", low ? Level::kWarn : Level::kOk,
      fmt::format("{}{} of {} available{}", what, util::format_bytes(f.mem_available),
                  util::format_bytes(f.mem_total), low ? ": other processes hold most of it" : ""));
}

void add_jetson_checks(Facts& f, const Jetson& j) {
  const Gpu& gpu = f.gpus.front();
  std::string board = j.model.empty() ? "NVIDIA Jetson" : j.model;
  if (!j.compatible.empty()) board += fmt::format(" ({}, {})", j.soc, j.compatible);
  if (!j.l4t_version.empty()) board += ", L4T " + j.l4t_version;
  if (!j.jetpack.empty()) board += ", JetPack " + j.jetpack;
  add(f, "board", Level::kInfo, board);
  add(f, "GPU", Level::kInfo,
      fmt::format("{}{}", gpu.name,
                  gpu.compute_capability.empty()
                      ? ""
                      : fmt::format(", compute capability {}", gpu.compute_capability)));
  add_power_mode(f, j);
  add_locked(f, j, gpu);
  if (j.cpus_online > 0) {
    add_clock(f, "CPU clock", j.cpu_freq_cur, j.cpu_freq_max, j.cpu_freq_hw_max,
              fmt::format("{} cores online, slowest at ", j.cpus_online));
  }
  if (gpu.freq_max > 0) add_clock(f, "GPU clock", gpu.freq_cur, gpu.freq_max, j.gpu_freq_hw_max);
  if (j.emc_freq_max > 0)
    add_clock(f, "EMC clock", j.emc_freq_cur, j.emc_freq_max, j.emc_freq_hw_max);
  else
    add(f, "EMC clock", Level::kInfo, "not readable (see notes)");
  add_temperature(f, j);
  add_memory(f, "unified (CPU and GPU share it): ");
}

void add_gpu_checks(Facts& f) {
  for (size_t i = 0; i < f.gpus.size(); ++i) {
    const Gpu& g = f.gpus[i];
    const std::string name = f.gpus.size() == 1 ? "GPU" : fmt::format("GPU {}", i);
    std::string detail = g.name;
    if (!g.compute_capability.empty()) detail += ", compute capability " + g.compute_capability;
    if (g.memory_total == 0) {
      add(f, name, Level::kInfo, detail + ", VRAM unknown");
      continue;
    }
    const bool low = g.memory_free < g.memory_total / 4;
    detail += fmt::format(", {} of {} VRAM free", util::format_bytes(g.memory_free),
                          util::format_bytes(g.memory_total));
    if (low) detail += ": other processes hold most of it (nvidia-smi lists them)";
    add(f, name, low ? Level::kWarn : Level::kOk, std::move(detail));
  }
}

}  // namespace

std::string mhz(uint64_t hz) {
  std::string s = fmt::format("{:.2f}", static_cast<double>(hz) / 1e6);
  while (s.ends_with('0')) s.pop_back();
  if (s.ends_with('.')) s.pop_back();
  return s + " MHz";
}

void add_checks(Facts& f) {
  f.checks.clear();
  if (f.jetson && !f.gpus.empty()) {
    add_jetson_checks(f, *f.jetson);
    return;
  }
  if (f.gpus.empty()) {
    add(f, "GPU", Level::kInfo, "no NVIDIA GPU found: CPU-only");
  } else {
    add_gpu_checks(f);
  }
  add_memory(f, "");
}

}  // namespace kvgate::device
