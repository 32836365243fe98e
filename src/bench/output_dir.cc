#include "bench/output_dir.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include <fmt/format.h>
#include <unistd.h>

namespace kvgate::bench {

Result<OutputDir> OutputDir::open(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Error(fmt::format("cannot create output folder {}: {}", dir.string(), ec.message()));
  if (!std::filesystem::is_directory(dir, ec)) {
    return Error(fmt::format("output path {} exists and is not a folder", dir.string()));
  }
  return OutputDir(dir);
}

Status OutputDir::write(std::string_view name, std::string_view content) {
  const auto target = dir_ / name;
  const auto tmp = dir_ / fmt::format(".{}.tmp{}", name, ::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return Error(fmt::format("cannot write {}: {}", tmp.string(), std::strerror(errno)));
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.flush();
    if (!out) return Error(fmt::format("writing {} failed: {}", tmp.string(), std::strerror(errno)));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, target, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return Error(fmt::format("cannot replace {}: {}", target.string(), ec.message()));
  }
  written_.push_back(target);
  return {};
}

}  // namespace kvgate::bench
