// nvidia-smi --query-gpu=name,compute_cap,memory.total,memory.free,clocks.sm,clocks.max.sm
//            --format=csv,noheader,nounits
// prints one line per GPU: "NVIDIA GeForce RTX 4070, 8.9, 12282, 11738, 210, 3105". A field
// the driver cannot give reads "[N/A]" (or "[Not Supported]"); when the driver is not loaded
// the command prints one sentence instead ("NVIDIA-SMI has failed because ..."). GPU names
// contain no commas.
#include <fmt/format.h>

#include "device/facts.h"
#include "device/tree.h"
#include "util/units.h"

namespace kvgate::device {
namespace {

constexpr size_t kFields = 6;
constexpr uint64_t kMaxMiB = uint64_t{1} << 30;  // 1 PiB: beyond it the number is not VRAM
constexpr uint64_t kMaxMHz = 100000;

bool unknown(std::string_view field) { return field.empty() || field.starts_with("[") || field == "N/A"; }

// A number field: unknown → 0; anything else that is not a number below `limit` → nullopt.
std::optional<uint64_t> number_field(std::string_view field, uint64_t limit) {
  if (unknown(field)) return 0;
  auto n = parse_u64(field);
  if (!n || *n > limit) return std::nullopt;
  return n;
}

bool compute_cap_ok(std::string_view cc) {
  const auto parts = split(cc, '.');
  return parts.size() == 2 && parse_u64(parts[0]) && parse_u64(parts[1]) && parts[0].size() <= 3 &&
         parts[1].size() <= 2;
}

std::optional<Gpu> parse_line(std::string_view line) {
  const auto raw = split(line, ',');
  if (raw.size() != kFields) return std::nullopt;
  std::vector<std::string_view> f;
  for (std::string_view field : raw) f.push_back(trim(field));
  if (unknown(f[0])) return std::nullopt;
  Gpu gpu;
  gpu.name = std::string(f[0]);
  if (!unknown(f[1])) {
    if (!compute_cap_ok(f[1])) return std::nullopt;
    gpu.compute_capability = std::string(f[1]);
  }
  auto total = number_field(f[2], kMaxMiB);
  auto free = number_field(f[3], kMaxMiB);
  auto sm = number_field(f[4], kMaxMHz);
  auto sm_max = number_field(f[5], kMaxMHz);
  if (!total || !free || !sm || !sm_max) return std::nullopt;
  gpu.memory_total = *total * util::kMiB;
  gpu.memory_free = *free * util::kMiB;
  gpu.freq_cur = *sm * 1000000;
  gpu.freq_max = *sm_max * 1000000;
  return gpu;
}

}  // namespace

std::vector<Gpu> parse_nvidia_smi(std::string_view text, std::vector<std::string>& notes) {
  std::vector<Gpu> gpus;
  size_t number = 0;
  for (std::string_view line : split(text, '\n')) {
    ++number;
    line = trim(line);
    if (line.empty()) continue;
    if (auto gpu = parse_line(line)) {
      gpus.push_back(std::move(*gpu));
      continue;
    }
    constexpr size_t kShown = 120;
    notes.push_back(
        fmt::format("nvidia-smi output line {} not understood (expected name, compute_cap, memory.total, "
                    "memory.free, clocks.sm, clocks.max.sm): '{}{}'",
                    number, line.substr(0, kShown), line.size() > kShown ? "..." : ""));
  }
  return gpus;
}

}  // namespace kvgate::device
