#include "bench/csv.h"

#include <cassert>
#include <cmath>

#include <fmt/format.h>

namespace kvgate::bench {

std::string csv_field(std::string_view text) {
  if (text.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(text);
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

std::string format_number(double value, int decimals) {
  if (std::isnan(value)) return "";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  std::string s = fmt::format("{:.{}f}", value, decimals < 0 ? 0 : decimals);
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  if (s == "-0") s = "0";
  return s;
}

CsvWriter::CsvWriter(std::vector<std::string> header) : width_(header.size()) { line(header); }

void CsvWriter::row(const std::vector<std::string>& fields) {
  assert(fields.size() == width_);
  line(fields);
  ++rows_;
}

void CsvWriter::line(const std::vector<std::string>& fields) {
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i > 0) text_ += ',';
    text_ += csv_field(fields[i]);
  }
  text_ += "\r\n";
}

}  // namespace kvgate::bench
