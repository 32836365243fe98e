// The Windows side of private files: what POSIX says with modes 0700/0600, Windows says with
// a protected access list that grants the file's owner alone (and the system account, which
// backs it up) full access, inherited by what is created inside a private folder.
// <windows.h> first: the headers after it need its types.
// clang-format off
#include <windows.h>
#include <sddl.h>
// clang-format on

#include <fstream>
#include <vector>

#include <fmt/format.h>

#include "util/private_files.h"
#include "util/windows_error.h"

namespace kvgate::util {

namespace fs = std::filesystem;

namespace {

// This process's user as an SDDL SID string ("S-1-5-21-..."), or "OW" (the owner) when it
// cannot be read.
std::wstring user_sid() {
  HANDLE token = nullptr;
  if (!::OpenProcessToken(::GetCurrentProcess(), TOKEN_QUERY, &token)) return L"OW";
  DWORD size = 0;
  ::GetTokenInformation(token, TokenUser, nullptr, 0, &size);
  std::vector<char> buf(size);
  std::wstring out = L"OW";
  if (size > 0 && ::GetTokenInformation(token, TokenUser, buf.data(), size, &size)) {
    wchar_t* text = nullptr;
    if (::ConvertSidToStringSidW(reinterpret_cast<TOKEN_USER*>(buf.data())->User.Sid, &text)) {
      out = text;
      ::LocalFree(text);
    }
  }
  ::CloseHandle(token);
  return out;
}

// P: protected (nothing inherited from the parent); OICI: inherited by files and folders
// inside; FA: full access, for this user and the system account (which backs files up).
Status restrict_to_owner(const fs::path& path) {
  static const std::wstring sddl = L"D:P(A;OICI;FA;;;" + user_sid() + L")(A;OICI;FA;;;SY)";
  PSECURITY_DESCRIPTOR sd = nullptr;
  if (!::ConvertStringSecurityDescriptorToSecurityDescriptorW(sddl.c_str(), SDDL_REVISION_1, &sd, nullptr)) {
    return Error(
        fmt::format("cannot build an access list for '{}': {}", path.string(), last_windows_error()));
  }
  const BOOL ok =
      ::SetFileSecurityW(path.c_str(), DACL_SECURITY_INFORMATION | PROTECTED_DACL_SECURITY_INFORMATION, sd);
  const std::string error = ok ? "" : last_windows_error();
  ::LocalFree(sd);
  if (!ok) return Error(fmt::format("cannot restrict the permissions of '{}': {}", path.string(), error));
  return {};
}

}  // namespace

Status make_private_dir(const fs::path& dir) {
  std::error_code ec;
  const bool created = fs::create_directories(dir, ec);
  if (ec) return Error(fmt::format("cannot create directory '{}': {}", dir.string(), ec.message()));
  // A folder that was there (a shared one someone named) keeps its access list.
  return created ? restrict_to_owner(dir) : Status{};
}

Status make_private_file(const fs::path& file) {
  const HANDLE h =
      ::CreateFileW(file.c_str(), FILE_APPEND_DATA, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
                    nullptr, OPEN_ALWAYS, FILE_ATTRIBUTE_NORMAL | FILE_FLAG_OPEN_REPARSE_POINT, nullptr);
  if (h == INVALID_HANDLE_VALUE) {
    return Error(fmt::format("cannot create '{}': {}", file.string(), last_windows_error()));
  }
  ::CloseHandle(h);
  return restrict_to_owner(file);
}

Status write_private_file(const fs::path& file, std::string_view content) {
  const fs::path tmp = file.string() + fmt::format(".tmp{}", ::GetCurrentProcessId());
  ::DeleteFileW(tmp.c_str());
  KV_TRY(make_private_file(tmp));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.close();
    if (!out) {
      ::DeleteFileW(tmp.c_str());
      return Error(fmt::format("cannot write '{}'", tmp.string()));
    }
  }
  if (!::MoveFileExW(tmp.c_str(), file.c_str(), MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH)) {
    Error e(fmt::format("cannot move '{}' into place: {}", file.string(), last_windows_error()));
    ::DeleteFileW(tmp.c_str());
    return e;
  }
  return {};
}

}  // namespace kvgate::util
