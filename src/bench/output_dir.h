// OutputDir: the folder a benchmark writes its files into (CSV, JSON, SVG, engine logs).
// open() creates it (and its parents) if needed. write() replaces a file atomically (a
// temporary file in the same folder, then rename), so a reader never sees half a chart, and
// remembers the path so the command can list what it wrote.
//
// Thread-safety: one owner.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace kvgate::bench {

class OutputDir {
 public:
  static Result<OutputDir> open(const std::filesystem::path& dir);
  Status write(std::string_view name, std::string_view content);
  std::filesystem::path path(std::string_view name) const { return dir_ / name; }
  const std::filesystem::path& dir() const { return dir_; }
  const std::vector<std::filesystem::path>& written() const { return written_; }

 private:
  explicit OutputDir(std::filesystem::path dir) : dir_(std::move(dir)) {}
  std::filesystem::path dir_;
  std::vector<std::filesystem::path> written_;
};

}  // namespace kvgate::bench
