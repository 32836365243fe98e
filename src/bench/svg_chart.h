// Line charts as standalone SVG text, for benchmark reports (no external libraries).
//
// A figure is one or more panels stacked vertically, each an x/y line chart with a title,
// axis labels, "nice" ticks (1-2-5 steps; powers of two on a log2 x axis), a legend, any
// number of series (lines with optional point markers, dashed or solid; NaN y values leave
// a gap) and vertical markers (e.g. a detected cliff). Points listed in a series' `crossed`
// are drawn as a cross — at their y value, or on the x axis when the value is missing — for
// failed requests. All text is XML-escaped; the output is deterministic for equal input.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kvgate::bench {

enum class AxisFormat {
  kNumber,  // 950, 1.5k, 12k, 3.4M
  kTokens,  // 512, 4k, 6k, 1.5k (k = 1024)
};

struct SvgSeries {
  std::string label;
  std::string color = "#1f77b4";
  std::vector<double> x, y;  // same length
  bool dashed = false;
  bool line = true;             // join the points
  bool points = true;           // a marker on every point
  std::vector<size_t> crossed;  // indices drawn as a cross (e.g. failed turns)
};

struct SvgMarker {
  double x = 0;
  std::string label;
  std::string color = "#c0392b";
};

struct SvgChart {
  std::string title;
  std::string note;  // a smaller line under the title
  std::string x_label, y_label;
  bool log_x = false;  // base-2 logarithmic x axis (x must be > 0)
  AxisFormat x_format = AxisFormat::kNumber;
  AxisFormat y_format = AxisFormat::kNumber;
  std::optional<double> y_min;  // default: 0 (or the data minimum if negative)
  std::optional<double> y_max;  // default: the data maximum, rounded up to a tick
  std::vector<SvgSeries> series;
  std::vector<SvgMarker> markers;
  bool legend_left = false;  // legend in the top-left corner instead of the top right
};

// The whole figure: `width` pixels wide, each panel `panel_height` high.
std::string render_svg(std::span<const SvgChart> panels, int width = 880, int panel_height = 400);

// Tick values covering [lo, hi] in 1-2-5 steps, about `target` of them (lo < hi).
std::vector<double> nice_ticks(double lo, double hi, int target = 6);
std::string format_tick(double value, AxisFormat format);

}  // namespace kvgate::bench
