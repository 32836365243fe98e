#include <string>

#include <windows.h>

#include "util/mapped_file.h"
#include "util/windows_error.h"

namespace kvgate::util {

Result<MappedFile> MappedFile::open(const std::filesystem::path& path) {
  const std::string name = path.string();
  HANDLE file = ::CreateFileW(path.c_str(), GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_DELETE, nullptr,
                              OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL, nullptr);
  if (file == INVALID_HANDLE_VALUE) return Error("cannot open '" + name + "': " + last_windows_error());
  LARGE_INTEGER size{};
  BY_HANDLE_FILE_INFORMATION info{};
  if (!::GetFileSizeEx(file, &size) || !::GetFileInformationByHandle(file, &info)) {
    Error e("cannot stat '" + name + "': " + last_windows_error());
    ::CloseHandle(file);
    return e;
  }
  if ((info.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY) != 0) {
    ::CloseHandle(file);
    return Error("'" + name + "' is not a regular file");
  }
  if (size.QuadPart == 0) {
    ::CloseHandle(file);
    return MappedFile();
  }
  // The view keeps the mapping (and the file) alive: both handles can be closed now.
  HANDLE mapping = ::CreateFileMappingW(file, nullptr, PAGE_READONLY, 0, 0, nullptr);
  const void* view = mapping != nullptr ? ::MapViewOfFile(mapping, FILE_MAP_READ, 0, 0, 0) : nullptr;
  const std::string error = view == nullptr ? last_windows_error() : "";
  if (mapping != nullptr) ::CloseHandle(mapping);
  ::CloseHandle(file);
  if (view == nullptr) return Error("cannot map '" + name + "': " + error);
  return MappedFile(static_cast<const std::byte*>(view), static_cast<size_t>(size.QuadPart));
}

void MappedFile::reset() {
  if (data_ != nullptr) ::UnmapViewOfFile(data_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace kvgate::util
