#include "device/tree.h"

#include <algorithm>
#include <fstream>
#include <system_error>

namespace kvgate::device {

namespace fs = std::filesystem;

fs::path Tree::path(std::string_view rel) const {
  while (!rel.empty() && rel.front() == '/') rel.remove_prefix(1);
  return rel.empty() ? root_ : root_ / fs::path(rel);
}

bool Tree::exists(std::string_view rel) const {
  std::error_code ec;
  return fs::exists(path(rel), ec);
}

std::optional<std::string> Tree::text(std::string_view rel) const {
  std::error_code ec;
  const fs::path p = path(rel);
  if (fs::is_directory(p, ec)) return std::nullopt;
  std::ifstream in(p, std::ios::binary);
  if (!in) return std::nullopt;
  std::string out;
  char buf[4096];
  while (out.size() < kMaxFileBytes) {
    in.read(buf, sizeof buf);
    const std::streamsize got = in.gcount();
    if (got <= 0) break;
    out.append(buf, static_cast<size_t>(got));
  }
  // A read error (EACCES on a debugfs node, EINVAL on a write-only one) is "unreadable".
  if (in.bad()) return std::nullopt;
  if (out.size() > kMaxFileBytes) out.resize(kMaxFileBytes);
  return out;
}

std::optional<std::string> Tree::line(std::string_view rel) const {
  auto t = text(rel);
  if (!t) return std::nullopt;
  std::string_view v = *t;
  const size_t nl = v.find('\n');
  if (nl != std::string_view::npos) v = v.substr(0, nl);
  return std::string(trim(v));
}

std::optional<uint64_t> Tree::number(std::string_view rel) const {
  auto t = text(rel);
  if (!t) return std::nullopt;
  return parse_u64(trim(*t));
}

std::optional<int64_t> Tree::signed_number(std::string_view rel) const {
  auto t = text(rel);
  if (!t) return std::nullopt;
  std::string_view v = trim(*t);
  const bool negative = !v.empty() && v.front() == '-';
  if (negative) v.remove_prefix(1);
  auto n = parse_u64(v);
  if (!n || *n > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
  const auto value = static_cast<int64_t>(*n);
  return negative ? -value : value;
}

std::vector<std::string> Tree::list(std::string_view rel) const {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(path(rel), ec), end; !ec && it != end; it.increment(ec)) {
    names.push_back(it->path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string_view trim(std::string_view s) {
  auto junk = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\0'; };
  while (!s.empty() && junk(s.front())) s.remove_prefix(1);
  while (!s.empty() && junk(s.back())) s.remove_suffix(1);
  return s;
}

std::optional<uint64_t> parse_u64(std::string_view s) {
  if (s.empty() || s.size() > 20) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    const auto digit = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - digit) / 10) return std::nullopt;
    v = v * 10 + digit;
  }
  return v;
}

std::optional<std::vector<uint32_t>> parse_cpu_list(std::string_view s) {
  constexpr uint64_t kMaxCpus = 4096;
  std::vector<uint32_t> cpus;
  s = trim(s);
  if (s.empty()) return cpus;
  for (std::string_view part : split(s, ',')) {
    const size_t dash = part.find('-');
    auto first = parse_u64(part.substr(0, dash));
    auto last = dash == std::string_view::npos ? first : parse_u64(part.substr(dash + 1));
    if (!first || !last || *last < *first || *last >= kMaxCpus) return std::nullopt;
    if (cpus.size() + (*last - *first + 1) > kMaxCpus) return std::nullopt;
    for (uint64_t c = *first; c <= *last; ++c) cpus.push_back(static_cast<uint32_t>(c));
  }
  return cpus;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (;;) {
    const size_t at = s.find(sep, start);
    if (at == std::string_view::npos) {
      out.push_back(s.substr(start));
      return out;
    }
    out.push_back(s.substr(start, at - start));
    start = at + 1;
  }
}

}  // namespace kvgate::device
