#include <fmt/format.h>

#include "device/facts.h"
#include "util/units.h"

namespace kvgate::device {
namespace {

std::string budget_line(const Facts& f) {
  auto budget = f.default_budget();
  if (!budget) {
    return f.gpus.size() > 1
               ? "memory budget: none by default (several GPUs): give --memory"
               : "memory budget: none by default (no GPU memory to plan against): give --memory";
  }
  const char* source = f.unified_memory ? "MemAvailable, shared by CPU and GPU" : "the GPU's free VRAM";
  return fmt::format("memory budget: {} by default ({})", util::format_bytes(*budget), source);
}

}  // namespace

std::string format_report(const Facts& f) {
  size_t width = 0;
  for (const Check& c : f.checks) width = std::max(width, c.name.size());
  std::string out = "device\n";
  for (const Check& c : f.checks) {
    out += fmt::format("  {:<5} {:<{}}  {}\n", level_name(c.level), c.name, width, c.detail);
  }
  out += budget_line(f) + "\n";
  if (!f.notes.empty()) {
    out += "notes\n";
    for (const std::string& n : f.notes) out += "  " + n + "\n";
  }
  return out;
}

}  // namespace kvgate::device
