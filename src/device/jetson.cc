#include "device/jetson.h"

#include <array>

#include <fmt/format.h>

namespace kvgate::device {
namespace {

// L4T → JetPack, for the releases NVIDIA published (as tabulated by jetson-stats,
// jtop/core/jetson_variables.py).
struct JetpackRow {
  std::string_view l4t;
  std::string_view jetpack;
};
constexpr std::array<JetpackRow, 22> kJetpacks = {{
    {"39.2.0", "7.2"},   {"38.4.0", "7.1"},   {"38.2.2", "7.0"},    {"38.2.1", "7.0"},   {"38.2.0", "7.0"},
    {"36.5.0", "6.2.2"}, {"36.4.7", "6.2.1"}, {"36.4.4", "6.2.1"},  {"36.4.3", "6.2"},   {"36.4.2", "6.1"},
    {"36.4.0", "6.1"},   {"36.3.0", "6.0"},   {"36.2.0", "6.0 DP"}, {"35.6.2", "5.1.5"}, {"35.6.1", "5.1.5"},
    {"35.6.0", "5.1.4"}, {"35.5.0", "5.1.3"}, {"35.4.1", "5.1.2"},  {"35.3.1", "5.1.1"}, {"35.2.1", "5.1"},
    {"35.1.0", "5.0.2"}, {"32.7.6", "4.6.6"},
}};

// The SoC's compatible entry → family, GPU name (as CUDA reports it) and compute capability.
struct SocRow {
  std::string_view compatible;
  std::string_view soc;
  std::string_view gpu_name;
  std::string_view compute_capability;
};
constexpr std::array<SocRow, 5> kSocs = {{
    {"nvidia,tegra264", "thor", "NVIDIA Thor", "11.0"},
    {"nvidia,tegra234", "orin", "Orin (nvgpu)", "8.7"},
    {"nvidia,tegra194", "xavier", "Xavier (nvgpu)", "7.2"},
    {"nvidia,tegra186", "tx2", "TX2 (nvgpu)", "6.2"},
    {"nvidia,tegra210", "tx1/nano", "Maxwell (nvgpu)", "5.3"},
}};

std::vector<std::string> compatible_entries(const Tree& tree) {
  std::vector<std::string> out;
  auto text = tree.text("proc/device-tree/compatible");
  if (!text) return out;
  for (std::string_view entry : split(*text, '\0')) {
    entry = trim(entry);
    if (!entry.empty()) out.emplace_back(entry);
  }
  return out;
}

void read_identity(const Tree& tree, Jetson& j, Gpu& gpu, std::vector<std::string>& notes) {
  if (auto model = tree.line("proc/device-tree/model"))
    j.model = *model;
  else
    notes.push_back("/proc/device-tree/model not readable: board model unknown");
  for (const std::string& entry : compatible_entries(tree)) {
    for (const SocRow& row : kSocs) {
      if (entry != row.compatible) continue;
      j.compatible = entry;
      j.soc = row.soc;
      gpu.name = row.gpu_name;
      gpu.compute_capability = row.compute_capability;
    }
  }
  if (j.soc.empty()) {
    notes.push_back("the device tree's compatible names no known Tegra SoC: GPU architecture unknown");
    gpu.name = "Tegra GPU";
  }
  auto release = tree.text("etc/nv_tegra_release");
  if (!release) {
    notes.push_back("/etc/nv_tegra_release not readable: L4T release unknown");
    return;
  }
  const std::string_view first = split(*release, '\n').front();
  auto parsed = parse_l4t_release(first);
  if (!parsed) {
    notes.push_back(fmt::format("/etc/nv_tegra_release: first line not understood: '{}'", trim(first)));
    return;
  }
  j.l4t_release = parsed->release;
  j.l4t_version = parsed->version;
  j.jetpack = jetpack_for_l4t(parsed->version);
  if (j.jetpack.empty())
    notes.push_back(fmt::format("L4T {} is not in kvgate's JetPack table", parsed->version));
}

void read_power_mode(const Tree& tree, Jetson& j, std::vector<std::string>& notes) {
  const auto models = parse_power_models(tree.text("etc/nvpmodel.conf").value_or(""));
  for (const PowerModel& m : models) {
    if (m.name.starts_with("MAXN")) {
      j.max_power_mode = m.name;
      j.max_power_mode_id = m.id;
      break;
    }
  }
  if (models.empty())
    notes.push_back("/etc/nvpmodel.conf not readable or has no POWER_MODEL: mode names unknown");
  auto status = tree.text("var/lib/nvpmodel/status");
  if (!status) {
    notes.push_back("/var/lib/nvpmodel/status not readable: power mode unknown");
    return;
  }
  j.power_mode_id = parse_pmode(*status);
  if (!j.power_mode_id) {
    notes.push_back(fmt::format("/var/lib/nvpmodel/status not understood: '{}'", trim(*status)));
    return;
  }
  j.power_mode = fmt::format("mode {}", *j.power_mode_id);
  for (const PowerModel& m : models) {
    if (m.id == *j.power_mode_id) j.power_mode = m.name;
  }
}

}  // namespace

bool looks_like_jetson(const Tree& tree) {
  if (tree.exists("etc/nv_tegra_release")) return true;
  for (const std::string& entry : compatible_entries(tree)) {
    if (entry.starts_with("nvidia,tegra")) return true;
  }
  return false;
}

JetsonReading read_jetson(const Tree& tree, std::vector<std::string>& notes) {
  JetsonReading r;
  read_identity(tree, r.jetson, r.gpu, notes);
  read_power_mode(tree, r.jetson, notes);
  read_jetson_clocks(tree, r.jetson, r.gpu, notes);
  return r;
}

std::optional<L4tRelease> parse_l4t_release(std::string_view line) {
  // "# R36 (release), REVISION: 4.3, GCID: 38968081, BOARD: generic, ..."
  line = trim(line);
  if (line.starts_with("#")) line = trim(line.substr(1));
  if (!line.starts_with("R")) return std::nullopt;
  const auto fields = split(line, ',');
  if (fields.size() < 2) return std::nullopt;
  const std::string_view head = trim(fields[0]);  // "R36 (release)"
  const size_t space = head.find(' ');
  auto major =
      parse_u64(head.substr(1, space == std::string_view::npos ? std::string_view::npos : space - 1));
  std::string_view revision = trim(fields[1]);  // "REVISION: 4.3"
  if (!major || !revision.starts_with("REVISION:")) return std::nullopt;
  revision = trim(revision.substr(9));
  const auto parts = split(revision, '.');
  if (parts.empty() || parts.size() > 2) return std::nullopt;
  for (std::string_view p : parts) {
    if (!parse_u64(p)) return std::nullopt;
  }
  std::string version = fmt::format("{}.{}.{}", *major, parts[0], parts.size() == 2 ? parts[1] : "0");
  return L4tRelease{.release = fmt::format("{}, REVISION: {}", head, revision),
                    .version = std::move(version)};
}

std::string jetpack_for_l4t(std::string_view version) {
  for (const JetpackRow& row : kJetpacks) {
    if (row.l4t == version) return std::string(row.jetpack);
  }
  return "";
}

std::vector<PowerModel> parse_power_models(std::string_view conf) {
  std::vector<PowerModel> out;
  for (std::string_view line : split(conf, '\n')) {
    line = trim(line);
    if (!line.starts_with("<") || !line.ends_with(">")) continue;
    line = trim(line.substr(1, line.size() - 2));
    if (!line.starts_with("POWER_MODEL ")) continue;
    std::optional<uint64_t> id;
    std::string name;
    for (std::string_view token : split(line, ' ')) {
      if (token.starts_with("ID=")) id = parse_u64(token.substr(3));
      if (token.starts_with("NAME=")) name = std::string(token.substr(5));
    }
    if (id && *id <= UINT32_MAX && !name.empty())
      out.push_back({static_cast<uint32_t>(*id), std::move(name)});
  }
  return out;
}

std::optional<uint32_t> parse_pmode(std::string_view status) {
  const size_t at = status.find("pmode:");
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view digits = status.substr(at + 6);
  size_t n = 0;
  while (n < digits.size() && digits[n] >= '0' && digits[n] <= '9') ++n;
  auto id = parse_u64(digits.substr(0, n));
  if (!id || *id > UINT32_MAX) return std::nullopt;
  return static_cast<uint32_t>(*id);
}

}  // namespace kvgate::device
