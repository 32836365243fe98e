// MappedFile: a read-only memory mapping of a whole file (move-only RAII).
//
// The mapping stays at the same address for the object's lifetime, also across moves, so
// views into bytes() stay valid as long as some MappedFile owns the mapping. An empty file
// maps to an empty span. Thread-safe for concurrent reads.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>

#include "util/result.h"

namespace kvgate::util {

class MappedFile {
 public:
  static Result<MappedFile> open(const std::filesystem::path& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  size_t size() const { return size_; }

 private:
  MappedFile(const std::byte* data, size_t size) : data_(data), size_(size) {}
  void reset();

  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace kvgate::util
