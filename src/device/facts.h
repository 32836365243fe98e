// Device facts: what the box kvgate runs on can give an LLM engine, read from sysfs, procfs
// and `nvidia-smi` — never assumed from the build machine.
//
// Every path is read under a root directory (`/` on a real machine, a fixture tree copied
// from a real device's layout in tests), and `nvidia-smi` output is passed in as text, so
// the readers are pure functions of their inputs.
//
// Jetson boards (detected from /etc/nv_tegra_release or the device tree's compatible
// string) share memory between CPU and GPU: `unified_memory` is then true and the memory
// the plan may use by default is MemAvailable. On a PC the NVIDIA GPUs come from
// `nvidia-smi --query-gpu=...`; without either, the machine is CPU-only (not an error).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvgate::device {

enum class Level { kOk, kWarn, kInfo };
// "ok", "warn", "info".
std::string_view level_name(Level level);

// One line of the device report: "clocks locked: yes" with a verdict.
struct Check {
  std::string name;  // "clocks", "temperature", "power mode", ...
  Level level = Level::kInfo;
  std::string detail;  // what was read and why it is ok / a warning
};

struct Gpu {
  std::string name;                // "NVIDIA GeForce RTX 4070", "Orin (nvgpu)"
  std::string compute_capability;  // "8.7", "11.0", "8.9"; empty when unknown
  uint64_t memory_total = 0;       // bytes (on a Jetson: the shared system memory)
  uint64_t memory_free = 0;        // bytes
  // Frequencies in Hz; 0 when not readable.
  uint64_t freq_cur = 0, freq_max = 0;
};

struct Jetson {
  std::string model;        // /proc/device-tree/model, e.g. "NVIDIA Jetson AGX Orin Developer Kit"
  std::string l4t_release;  // "R36 (release), REVISION: 4.3" from /etc/nv_tegra_release
  std::string l4t_version;  // "36.4.3"; empty when the release line is not understood
  std::string jetpack;      // "6.2" when the L4T release maps to a known JetPack; else empty
  std::string soc;          // "orin", "thor", "xavier", ...
  std::string compatible;   // the SoC's device-tree compatible entry, "nvidia,tegra234"
  std::optional<std::string> power_mode;      // nvpmodel mode name/id when readable
  std::optional<uint32_t> power_mode_id;      // from /var/lib/nvpmodel/status ("pmode:0000")
  std::optional<std::string> max_power_mode;  // the conf's MAXN mode ("MAXN", "MAXN_SUPER")
  std::optional<uint32_t> max_power_mode_id;
  std::optional<bool> clocks_locked;  // jetson_clocks applied (cur == max on CPU/GPU/EMC)
  // Online CPU cores (cpufreq, Hz): the slowest core now, the lowest floor, the ceiling the
  // power mode allows and the hardware's; jetson_clocks raises every floor to the ceiling.
  uint32_t cpus_online = 0;
  uint64_t cpu_freq_cur = 0, cpu_freq_min = 0, cpu_freq_max = 0, cpu_freq_hw_max = 0;
  // GPU devfreq floor and the hardware's fastest step (available_frequencies); the current
  // frequency and the power mode's ceiling are gpus[0].freq_cur / freq_max.
  uint64_t gpu_freq_min = 0, gpu_freq_hw_max = 0;
  uint64_t emc_freq_cur = 0, emc_freq_max = 0;  // Hz; max is the power mode's cap when lower
  uint64_t emc_freq_hw_max = 0;                 // Hz, before the cap
  std::optional<bool> emc_locked;               // the rate is pinned (mrq_rate_locked, or min == max)
  double temp_max_c = 0;                        // hottest thermal zone now
  std::string temp_max_zone;                    // its type, "tj-thermal"
  double temp_throttle_c = 0;                   // the lowest passive/throttle trip point seen
};

struct Facts {
  std::string arch;             // uname machine: "aarch64", "x86_64"
  uint64_t mem_total = 0;       // /proc/meminfo MemTotal, bytes
  uint64_t mem_available = 0;   // MemAvailable, bytes
  bool unified_memory = false;  // CPU and GPU share mem_total (Jetson)
  std::optional<Jetson> jetson;
  std::vector<Gpu> gpus;           // empty: no NVIDIA GPU found
  std::vector<Check> checks;       // the report's lines, in order
  std::vector<std::string> notes;  // what could not be read and why

  // The CUDA architecture to build for ("87" for Orin, "110" for Thor, "89" for an RTX 40xx);
  // empty when there is no GPU.
  std::string cuda_arch() const;
  // The memory the plan uses by default: unified → mem_available; one GPU → its free VRAM.
  std::optional<uint64_t> default_budget() const;
  // One line for `kvgate up`: board or GPU, release, power mode, clocks, memory.
  std::string summary() const;
  bool has_warnings() const;
};

// The parts of read_facts(), for tests and for callers with their own sources.
// Parses the nvidia-smi query above: one GPU per line, MiB and MHz, "[N/A]" fields unknown;
// a line that is not six fields adds a note and is skipped.
std::vector<Gpu> parse_nvidia_smi(std::string_view text, std::vector<std::string>& notes);
// Fills facts.checks from the facts read (called by read_facts).
void add_checks(Facts& facts);
// The device report `kvgate doctor` prints: the checks with their verdicts, the default
// memory budget, the notes.
std::string format_report(const Facts& facts);

// Reads the device under `root`. `nvidia_smi` is the output of
//   nvidia-smi --query-gpu=name,compute_cap,memory.total,memory.free,clocks.sm,clocks.max.sm
//   --format=csv,noheader,nounits
// or nullopt when the command is absent or failed.
Facts read_facts(const std::filesystem::path& root, const std::optional<std::string>& nvidia_smi);

// On the real machine: root "/", runs nvidia-smi when it is on PATH.
Facts read_local_facts();

}  // namespace kvgate::device
