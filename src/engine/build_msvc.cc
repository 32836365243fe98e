#include "engine/build_msvc.h"

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "util/strings.h"

namespace kvgate::engine {
namespace {

namespace fs = std::filesystem;

bool same_ignoring_case(std::string_view a, std::string_view b) {
  return util::ascii_lower(a) == util::ascii_lower(b);
}

// "cudart64_12.dll" matches "cudart64_": the name starts with the prefix, ends in .dll.
bool runtime_dll(const std::string& name) {
  if (name.size() < 4 || !same_ignoring_case(std::string_view(name).substr(name.size() - 4), ".dll"))
    return false;
  for (std::string_view prefix : {"cudart64_", "cublas64_", "cublasLt64_"}) {
    if (name.size() > prefix.size() &&
        same_ignoring_case(std::string_view(name).substr(0, prefix.size()), prefix))
      return true;
  }
  return false;
}

}  // namespace

std::string VisualStudio::generator() const {
  const int major = std::atoi(version.c_str());
  switch (major) {
    case 16:
      return "Visual Studio 16 2019";
    case 17:
      return "Visual Studio 17 2022";
    case 18:
      return "Visual Studio 18 2026";
    default:
      return "";
  }
}

std::string VisualStudio::bundled_ninja() const {
  return path + "\\Common7\\IDE\\CommonExtensions\\Microsoft\\CMake\\Ninja\\ninja.exe";
}

std::vector<std::string> vswhere_command(std::string_view program_files_x86) {
  return {fmt::format("{}\\Microsoft Visual Studio\\Installer\\vswhere.exe", program_files_x86),
          "-latest",
          "-products",
          "*",
          "-requires",
          "Microsoft.VisualStudio.Component.VC.Tools.x86.x64",
          "-format",
          "json",
          "-utf8"};
}

std::optional<VisualStudio> parse_vswhere(std::string_view json_text) {
  const auto doc = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_array() || doc.empty() || !doc[0].is_object()) return std::nullopt;
  const auto& first = doc[0];
  const auto path = first.find("installationPath");
  if (path == first.end() || !path->is_string() || path->get<std::string>().empty()) return std::nullopt;
  VisualStudio vs;
  vs.path = path->get<std::string>();
  while (!vs.path.empty() && (vs.path.back() == '\\' || vs.path.back() == '/')) vs.path.pop_back();
  if (const auto v = first.find("installationVersion"); v != first.end() && v->is_string())
    vs.version = v->get<std::string>();
  vs.vcvars = vs.path + "\\VC\\Auxiliary\\Build\\vcvars64.bat";
  return vs;
}

std::map<std::string, std::string> parse_environment(std::string_view set_output) {
  std::map<std::string, std::string> env;
  size_t start = 0;
  while (start < set_output.size()) {
    size_t end = set_output.find('\n', start);
    if (end == std::string_view::npos) end = set_output.size();
    std::string_view line = set_output.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    // "=C:=C:\dir" entries (a drive's current folder) start with '=': not variables.
    const size_t eq = line.find('=');
    if (eq != std::string_view::npos && eq > 0) env[std::string(line.substr(0, eq))] = line.substr(eq + 1);
    start = end + 1;
  }
  return env;
}

std::optional<std::string> environment_value(const std::map<std::string, std::string>& env,
                                             std::string_view name) {
  for (const auto& [key, value] : env) {
    if (same_ignoring_case(key, name)) return value;
  }
  return std::nullopt;
}

std::vector<fs::path> cuda_runtime_dlls(const fs::path& nvcc) {
  std::vector<fs::path> out;
  const fs::path bin = nvcc.parent_path();
  for (const fs::path& dir : {bin, bin / "x64"}) {
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      if (it->is_regular_file(ec) && runtime_dll(it->path().filename().string())) out.push_back(it->path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace kvgate::engine
