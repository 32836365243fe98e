// CSV text (RFC 4180): a header row, then rows of the same width. Fields that contain a
// comma, a double quote, CR or LF are quoted, with inner quotes doubled; lines end in CRLF
// as the RFC says (spreadsheets and pandas read both). Numbers are written by
// format_number(): shortest round-trip-safe text for the precision asked, NaN as an empty
// field (a missing value).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kvgate::bench {

std::string csv_field(std::string_view text);
// `decimals` digits after the point, trailing zeros removed ("12.5", "3"); NaN -> "".
std::string format_number(double value, int decimals = 3);

class CsvWriter {
 public:
  explicit CsvWriter(std::vector<std::string> header);
  // REQUIRES: fields.size() == header size.
  void row(const std::vector<std::string>& fields);
  size_t rows() const { return rows_; }
  const std::string& text() const { return text_; }

 private:
  void line(const std::vector<std::string>& fields);
  size_t width_;
  size_t rows_ = 0;
  std::string text_;
};

}  // namespace kvgate::bench
