#include "engine/log_scan.h"

#include <cctype>
#include <charconv>
#include <limits>

namespace kvgate::engine {

void Scan::ws() {
  while (!s_.empty() && (s_.front() == ' ' || s_.front() == '\t')) s_.remove_prefix(1);
}

bool Scan::lit(std::string_view x) {
  ws();
  if (s_.substr(0, x.size()) != x) return false;
  s_.remove_prefix(x.size());
  return true;
}

std::optional<uint32_t> Scan::u32() {
  ws();
  uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(s_.data(), s_.data() + s_.size(), v);
  if (ec != std::errc() || v > std::numeric_limits<uint32_t>::max()) return std::nullopt;
  s_.remove_prefix(static_cast<size_t>(ptr - s_.data()));
  return static_cast<uint32_t>(v);
}

std::optional<int32_t> Scan::i32() {
  ws();
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(s_.data(), s_.data() + s_.size(), v);
  if (ec != std::errc() || v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
    return std::nullopt;
  }
  s_.remove_prefix(static_cast<size_t>(ptr - s_.data()));
  return static_cast<int32_t>(v);
}

std::optional<double> Scan::num() {
  ws();
  double v = 0;
  auto [ptr, ec] = std::from_chars(s_.data(), s_.data() + s_.size(), v);
  if (ec != std::errc() || !(v >= 0) || v > 1e15) return std::nullopt;
  s_.remove_prefix(static_cast<size_t>(ptr - s_.data()));
  return v;
}

std::optional<std::string_view> Scan::until(char stop) {
  const size_t at = s_.find(stop);
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view out = s_.substr(0, at);
  s_.remove_prefix(at + 1);
  return out;
}

std::string_view Scan::word() {
  ws();
  size_t n = 0;
  while (n < s_.size() && s_[n] != ' ' && s_[n] != '\t' && s_[n] != ',') ++n;
  std::string_view out = s_.substr(0, n);
  s_.remove_prefix(n);
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string strip_colours(std::string_view line) {
  std::string out;
  out.reserve(line.size());
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '\x1b' && i + 1 < line.size() && line[i + 1] == '[') {
      i += 2;
      while (i < line.size() && !std::isalpha(static_cast<unsigned char>(line[i]))) ++i;
      continue;
    }
    out.push_back(line[i]);
  }
  return out;
}

char strip_prefix(std::string_view& line) {
  size_t i = 0;
  while (i < line.size() && (std::isdigit(static_cast<unsigned char>(line[i])) || line[i] == '.')) ++i;
  if (i == 0 || i + 2 >= line.size() || line[i] != ' ' || line[i + 2] != ' ') return 0;
  const char level = line[i + 1];
  if (level != 'I' && level != 'W' && level != 'E' && level != 'D' && level != 'T') return 0;
  line.remove_prefix(i + 3);
  return level;
}

std::pair<std::string_view, std::string_view> split_tag(std::string_view line) {
  const size_t colon = line.find(": ");
  if (colon == std::string_view::npos || colon == 0) return {{}, line};
  const std::string_view tag = line.substr(0, colon);
  for (char c : tag) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return {{}, line};
  }
  return {tag, line.substr(colon + 2)};
}

std::optional<bool> parse_bool_word(std::string_view w) {
  if (w == "true" || w == "1" || w == "enabled" || w == "on") return true;
  if (w == "false" || w == "0" || w == "disabled" || w == "off") return false;
  return std::nullopt;
}

std::optional<Shape> parse_shape(Scan& s) {
  Shape sh;
  auto cells = s.u32();
  if (!cells || !s.lit("cells,")) return std::nullopt;
  auto layers = s.u32();
  if (!layers || !s.lit("layers,")) return std::nullopt;
  auto seqs = s.u32();
  if (!seqs) return std::nullopt;
  if (s.lit("/")) {
    auto streams = s.u32();
    if (!streams) return std::nullopt;
    sh.streams = streams;
  }
  if (!s.lit("seqs")) return std::nullopt;
  sh.cells = *cells;
  sh.layers = *layers;
  sh.seqs = *seqs;
  return sh;
}

bool parse_typed(Scan& s, std::string_view label, std::string& type, double& mib) {
  if (!s.lit(label) || !s.lit("(")) return false;
  auto t = s.until(')');
  if (!t || t->empty() || t->size() > 16) return false;
  if (!s.lit(":")) return false;
  auto v = s.num();
  if (!v || !s.lit("MiB")) return false;
  type = std::string(*t);
  mib = *v;
  return true;
}

std::optional<uint32_t> ik_field(std::string_view line, std::string_view key) {
  const size_t bar = line.find('|');
  if (bar == std::string_view::npos) return std::nullopt;
  std::string_view rest = line.substr(bar + 1);
  const std::string needle = " " + std::string(key) + "=";
  const size_t at = rest.find(needle);
  if (at == std::string_view::npos) return std::nullopt;
  Scan s(rest.substr(at + needle.size()));
  return s.u32();
}

}  // namespace kvgate::engine
