#include "device/facts.h"

#include <fmt/format.h>

#include "device/host.h"
#include "device/jetson.h"
#include "device/tree.h"
#include "util/units.h"

namespace kvgate::device {
namespace {

// "MemTotal:       24683652 kB" → bytes.
std::optional<uint64_t> meminfo_field(std::string_view meminfo, std::string_view key) {
  for (std::string_view line : split(meminfo, '\n')) {
    if (!line.starts_with(key) || line.size() <= key.size() || line[key.size()] != ':') continue;
    std::string_view value = trim(line.substr(key.size() + 1));
    if (!value.ends_with(" kB")) return std::nullopt;
    auto kib = parse_u64(trim(value.substr(0, value.size() - 3)));
    if (!kib || *kib > UINT64_MAX / util::kKiB) return std::nullopt;
    return *kib * util::kKiB;
  }
  return std::nullopt;
}

void read_memory(const Tree& tree, Facts& f) {
  std::error_code ec;
  if (const auto host = host_memory(); host && std::filesystem::equivalent(tree.root(), "/", ec)) {
    f.mem_total = host->total;
    f.mem_available = host->available;
    return;
  }
  auto meminfo = tree.text("proc/meminfo");
  auto total = meminfo ? meminfo_field(*meminfo, "MemTotal") : std::nullopt;
  auto available = meminfo ? meminfo_field(*meminfo, "MemAvailable") : std::nullopt;
  if (!total || !available) {
    f.notes.push_back("/proc/meminfo not readable or without MemTotal/MemAvailable: memory unknown");
    return;
  }
  f.mem_total = *total;
  f.mem_available = *available;
}

std::string read_arch(const Tree& tree) {
  if (auto arch = tree.line("proc/sys/kernel/arch"); arch && !arch->empty()) return *arch;
  std::error_code ec;
  if (std::filesystem::equivalent(tree.root(), "/", ec)) {
    return host_machine();
  }
  return "";
}

std::string gib(uint64_t bytes) { return util::format_bytes(bytes); }

std::string jetson_summary(const Facts& f, const Jetson& j) {
  std::string out = j.model.empty() ? "NVIDIA Jetson (model unknown)" : j.model;
  if (!j.l4t_version.empty()) {
    out += j.jetpack.empty() ? fmt::format(", L4T {}", j.l4t_version)
                             : fmt::format(", JetPack {} (L4T {})", j.jetpack, j.l4t_version);
  }
  if (j.power_mode) out += ", " + *j.power_mode;
  if (j.clocks_locked) out += *j.clocks_locked ? ", clocks locked" : ", clocks not locked";
  if (j.temp_max_c > 0) out += fmt::format(", {:.1f} °C", j.temp_max_c);
  out += fmt::format(", {} of {} available (unified memory)", gib(f.mem_available), gib(f.mem_total));
  return out;
}

}  // namespace

std::string_view level_name(Level level) {
  switch (level) {
    case Level::kOk:
      return "ok";
    case Level::kWarn:
      return "warn";
    case Level::kInfo:
      return "info";
  }
  return "info";
}

std::string Facts::cuda_arch() const {
  std::string out;
  for (const Gpu& g : gpus) {
    std::string sm;
    for (char c : g.compute_capability) {
      if (c != '.') sm += c;
    }
    if (sm.empty() || (";" + out + ";").find(";" + sm + ";") != std::string::npos) continue;
    out += (out.empty() ? "" : ";") + sm;
  }
  return out;
}

std::optional<uint64_t> Facts::default_budget() const {
  if (unified_memory) return mem_available > 0 ? std::optional<uint64_t>(mem_available) : std::nullopt;
  if (gpus.size() == 1 && gpus.front().memory_free > 0) return gpus.front().memory_free;
  return std::nullopt;
}

std::string Facts::summary() const {
  if (jetson) return jetson_summary(*this, *jetson);
  std::string out = arch.empty() ? "" : arch + ", ";
  if (gpus.empty()) {
    out += "no NVIDIA GPU found: CPU-only";
  } else {
    for (size_t i = 0; i < gpus.size(); ++i) {
      const Gpu& g = gpus[i];
      out += fmt::format("{}{}{}", i == 0 ? "" : ", ", g.name,
                         g.compute_capability.empty() ? "" : " (compute " + g.compute_capability + ")");
      if (g.memory_total > 0)
        out += fmt::format(" {} of {} VRAM free", gib(g.memory_free), gib(g.memory_total));
    }
  }
  if (mem_total > 0) out += fmt::format(", {} of {} RAM available", gib(mem_available), gib(mem_total));
  return out;
}

bool Facts::has_warnings() const {
  for (const Check& c : checks) {
    if (c.level == Level::kWarn) return true;
  }
  return false;
}

Facts read_facts(const std::filesystem::path& root, const std::optional<std::string>& nvidia_smi) {
  Facts f;
  const Tree tree(root);
  f.arch = read_arch(tree);
  read_memory(tree, f);
  std::vector<Gpu> listed;
  if (nvidia_smi) listed = parse_nvidia_smi(*nvidia_smi, f.notes);
  if (looks_like_jetson(tree)) {
    JetsonReading r = read_jetson(tree, f.notes);
    // The integrated GPU shares the system memory. JetPack 7's driver answers nvidia-smi
    // too; its name and compute capability win over the SoC table's.
    r.gpu.memory_total = f.mem_total;
    r.gpu.memory_free = f.mem_available;
    if (!listed.empty()) {
      if (!listed.front().name.empty()) r.gpu.name = listed.front().name;
      if (!listed.front().compute_capability.empty())
        r.gpu.compute_capability = listed.front().compute_capability;
    }
    f.jetson = std::move(r.jetson);
    f.unified_memory = true;
    f.gpus.push_back(std::move(r.gpu));
  } else {
    f.gpus = std::move(listed);
  }
  add_checks(f);
  return f;
}

}  // namespace kvgate::device
