#include "bench/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "bench/csv.h"
#include "util/xml_text.h"

namespace kvgate::bench {

using util::xml_escape;

namespace {

constexpr double kLeft = 78, kRight = 24, kTop = 62, kBottom = 52;

struct Scale {
  double lo = 0, hi = 1;  // data range
  double a = 0, b = 1;    // pixel range
  bool log = false;
  double operator()(double v) const {
    const double t =
        log ? (std::log2(v) - std::log2(lo)) / (std::log2(hi) - std::log2(lo)) : (v - lo) / (hi - lo);
    return a + t * (b - a);
  }
};

std::string num(double v) { return format_number(v, 1); }

std::vector<double> log2_ticks(double lo, double hi) {
  std::vector<double> out;
  int from = static_cast<int>(std::ceil(std::log2(lo) - 1e-9));
  int to = static_cast<int>(std::floor(std::log2(hi) + 1e-9));
  int step = 1;
  while ((to - from) / step + 1 > 10) ++step;
  for (int e = from; e <= to; e += step) out.push_back(std::ldexp(1.0, e));
  return out;
}

void polyline(std::string& out, const Scale& sx, const Scale& sy, const SvgSeries& s) {
  std::string pts;
  auto flush = [&] {
    if (pts.empty()) return;
    out += fmt::format(R"(<polyline fill="none" stroke="{}" stroke-width="2"{} points="{}"/>)",
                       xml_escape(s.color), s.dashed ? R"( stroke-dasharray="6 4")" : "", pts);
    out += '\n';
    pts.clear();
  };
  const size_t n = std::min(s.x.size(), s.y.size());
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(s.y[i]) || !std::isfinite(s.x[i])) {
      flush();
      continue;
    }
    if (!pts.empty()) pts += ' ';
    pts += num(sx(s.x[i])) + "," + num(sy(s.y[i]));
  }
  flush();
}

// The note in lines that fit the width (about 6.5 pixels a character at 12 px), at most 3.
std::vector<std::string> wrap(const std::string& text, double width) {
  const auto max_chars = static_cast<size_t>(std::max(20.0, (width - kLeft - kRight) / 6.5));
  std::vector<std::string> lines;
  std::string rest = text;
  while (!rest.empty() && lines.size() < 3) {
    if (rest.size() <= max_chars) {
      lines.push_back(rest);
      break;
    }
    size_t cut = rest.rfind(' ', max_chars);
    if (cut == std::string::npos || cut == 0) cut = max_chars;
    lines.push_back(rest.substr(0, cut));
    rest = rest.substr(std::min(rest.size(), cut + 1));
    if (lines.size() == 3 && !rest.empty()) lines.back() += " ...";
  }
  return lines;
}

// A panel's plot area, its scales and ticks.
struct Frame {
  double left = 0, right = 0, top = 0, bottom = 0;  // the plot area, pixels
  Scale sx, sy;
  std::vector<double> xticks, yticks;
};

struct Range {
  double lo = 0, hi = 0;
};

// The data's x and y ranges (x also covers the markers); points a log axis cannot show are
// left out.
std::pair<Range, Range> data_ranges(const SvgChart& c) {
  double xlo = std::numeric_limits<double>::infinity(), xhi = -xlo, ylo = xlo, yhi = -xlo;
  for (const auto& s : c.series) {
    const size_t n = std::min(s.x.size(), s.y.size());
    for (size_t i = 0; i < n; ++i) {
      if (!std::isfinite(s.x[i]) || (c.log_x && s.x[i] <= 0)) continue;
      xlo = std::min(xlo, s.x[i]);
      xhi = std::max(xhi, s.x[i]);
      if (!std::isfinite(s.y[i])) continue;
      ylo = std::min(ylo, s.y[i]);
      yhi = std::max(yhi, s.y[i]);
    }
  }
  for (const auto& m : c.markers) {
    if (std::isfinite(m.x) && (!c.log_x || m.x > 0)) {
      xlo = std::min(xlo, m.x);
      xhi = std::max(xhi, m.x);
    }
  }
  return {{xlo, xhi}, {ylo, yhi}};
}

// The axes: the data ranges widened to whole ticks (and the chart's fixed limits).
Frame panel_frame(const SvgChart& c, double plot_l, double plot_r, double plot_t, double plot_b) {
  auto [x, y] = data_ranges(c);
  double xlo = x.lo, xhi = x.hi, ylo = y.lo, yhi = y.hi;
  if (!std::isfinite(xlo)) xlo = c.log_x ? 1 : 0, xhi = c.log_x ? 2 : 1;
  if (!std::isfinite(ylo)) ylo = 0, yhi = 1;
  if (xhi <= xlo) xhi = c.log_x ? xlo * 2 : xlo + 1;
  ylo = c.y_min.value_or(std::min(0.0, ylo));
  if (c.y_max) yhi = *c.y_max;
  if (yhi <= ylo) yhi = ylo + 1;
  Frame f{.left = plot_l, .right = plot_r, .top = plot_t, .bottom = plot_b};
  f.yticks = nice_ticks(ylo, yhi, 6);
  if (!c.y_max && !f.yticks.empty()) yhi = std::max(yhi, f.yticks.back());
  if (!c.y_min && !f.yticks.empty()) ylo = std::min(ylo, f.yticks.front());
  if (c.log_x) {
    f.xticks = log2_ticks(xlo, xhi);
    // A little room on a log axis so the end points do not sit on the frame.
    xlo /= 1.08;
    xhi *= 1.08;
  } else {
    f.xticks = nice_ticks(xlo, xhi, 8);
    xlo = std::min(xlo, f.xticks.front());
    xhi = std::max(xhi, f.xticks.back());
  }
  f.sx = Scale{xlo, xhi, plot_l, plot_r, c.log_x};
  f.sy = Scale{ylo, yhi, plot_b, plot_t, false};
  return f;
}

void draw_title(std::string& out, const SvgChart& c, const std::vector<std::string>& note_lines, double left,
                double y0) {
  out += fmt::format(R"(<text x="{}" y="{}" font-size="16" font-weight="bold">{}</text>)", num(left),
                     num(y0 + 24), xml_escape(c.title));
  out += '\n';
  for (size_t i = 0; i < note_lines.size(); ++i) {
    out += fmt::format(R"(<text x="{}" y="{}" font-size="12" fill="#555">{}</text>)", num(left),
                       num(y0 + 42 + 15 * static_cast<double>(i)), xml_escape(note_lines[i]));
    out += '\n';
  }
}

// Grid lines, tick labels, the frame and the axis labels.
void draw_axes(std::string& out, const SvgChart& c, const Frame& f) {
  for (double t : f.yticks) {
    if (t < f.sy.lo - 1e-9 || t > f.sy.hi + 1e-9) continue;
    const double y = f.sy(t);
    out += fmt::format(R"(<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="#e5e5e5"/>)", num(f.left), num(y),
                       num(f.right), num(y));
    out += fmt::format(R"(<text x="{}" y="{}" font-size="11" text-anchor="end" fill="#333">{}</text>)",
                       num(f.left - 6), num(y + 4), xml_escape(format_tick(t, c.y_format)));
    out += '\n';
  }
  for (double t : f.xticks) {
    if (t < f.sx.lo - 1e-9 || t > f.sx.hi + 1e-9) continue;
    const double x = f.sx(t);
    out += fmt::format(R"(<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="#f0f0f0"/>)", num(x), num(f.top),
                       num(x), num(f.bottom));
    out += fmt::format(R"(<text x="{}" y="{}" font-size="11" text-anchor="middle" fill="#333">{}</text>)",
                       num(x), num(f.bottom + 16), xml_escape(format_tick(t, c.x_format)));
    out += '\n';
  }
  out += fmt::format(R"(<rect x="{}" y="{}" width="{}" height="{}" fill="none" stroke="#888"/>)", num(f.left),
                     num(f.top), num(f.right - f.left), num(f.bottom - f.top));
  out += '\n';
  out += fmt::format(R"(<text x="{}" y="{}" font-size="12" text-anchor="middle">{}</text>)",
                     num((f.left + f.right) / 2), num(f.bottom + 38), xml_escape(c.x_label));
  out += fmt::format(
      R"svg(<text x="{}" y="{}" font-size="12" text-anchor="middle" transform="rotate(-90 {} {})">{}</text>)svg",
      num(18), num((f.top + f.bottom) / 2), num(18), num((f.top + f.bottom) / 2), xml_escape(c.y_label));
  out += '\n';
}

void draw_markers(std::string& out, const SvgChart& c, const Frame& f) {
  for (const auto& m : c.markers) {
    if (!std::isfinite(m.x) || (c.log_x && m.x <= 0)) continue;
    const double x = f.sx(m.x);
    out += fmt::format(
        R"(<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="{}" stroke-width="1.5" stroke-dasharray="4 3"/>)",
        num(x), num(f.top), num(x), num(f.bottom), xml_escape(m.color));
    if (m.label.empty()) continue;
    const bool right_half = x > (f.left + f.right) / 2;
    out += fmt::format(R"(<text x="{}" y="{}" font-size="11" fill="{}" text-anchor="{}">{}</text>)",
                       num(x + (right_half ? -4 : 4)), num(f.bottom - 6), xml_escape(m.color),
                       right_half ? "end" : "start", xml_escape(m.label));
    out += '\n';
  }
}

// Each series: its line, its points and the crosses of its failed points.
void draw_series(std::string& out, const SvgChart& c, const Frame& f) {
  for (const auto& s : c.series) {
    if (s.line) polyline(out, f.sx, f.sy, s);
    const size_t n = std::min(s.x.size(), s.y.size());
    if (s.points) {
      for (size_t i = 0; i < n; ++i) {
        if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) continue;
        out += fmt::format(R"(<circle cx="{}" cy="{}" r="3" fill="{}"><title>{}: {}, {}</title></circle>)",
                           num(f.sx(s.x[i])), num(f.sy(s.y[i])), xml_escape(s.color), xml_escape(s.label),
                           format_number(s.x[i], 2), format_number(s.y[i], 2));
        out += '\n';
      }
    }
    for (size_t i : s.crossed) {
      if (i >= n || !std::isfinite(s.x[i])) continue;
      const double x = f.sx(s.x[i]);
      const double y = std::isfinite(s.y[i]) ? f.sy(s.y[i]) : f.bottom;
      out += fmt::format(
          R"(<path d="M{} {}L{} {}M{} {}L{} {}" stroke="{}" stroke-width="2"><title>{}: failed at {}</title></path>)",
          num(x - 5), num(y - 5), num(x + 5), num(y + 5), num(x - 5), num(y + 5), num(x + 5), num(y - 5),
          xml_escape(s.color), xml_escape(s.label), format_number(s.x[i], 2));
      out += '\n';
    }
  }
}

// The legend, in the top right (or left) corner inside the plot.
void draw_legend(std::string& out, const SvgChart& c, const Frame& f) {
  if (c.series.empty()) return;
  double lw = 0;
  for (const auto& s : c.series) lw = std::max(lw, 7.0 * static_cast<double>(s.label.size()));
  const double box_w = lw + 44, box_h = 8 + 18 * static_cast<double>(c.series.size());
  const double bx = c.legend_left ? f.left + 8 : f.right - box_w - 8, by = f.top + 8;
  out += fmt::format(
      R"(<rect x="{}" y="{}" width="{}" height="{}" fill="white" fill-opacity="0.85" stroke="#ccc"/>)",
      num(bx), num(by), num(box_w), num(box_h));
  out += '\n';
  for (size_t i = 0; i < c.series.size(); ++i) {
    const auto& s = c.series[i];
    const double ly = by + 16 + 18 * static_cast<double>(i);
    if (s.line) {
      out += fmt::format(R"(<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="{}" stroke-width="2"{}/>)",
                         num(bx + 8), num(ly - 4), num(bx + 30), num(ly - 4), xml_escape(s.color),
                         s.dashed ? R"( stroke-dasharray="6 4")" : "");
    } else {
      out += fmt::format(R"(<circle cx="{}" cy="{}" r="3" fill="{}"/>)", num(bx + 19), num(ly - 4),
                         xml_escape(s.color));
    }
    out += fmt::format(R"(<text x="{}" y="{}" font-size="12">{}</text>)", num(bx + 36), num(ly),
                       xml_escape(s.label));
    out += '\n';
  }
}

void render_panel(std::string& out, const SvgChart& c, double y0, double width, double height) {
  const auto note_lines = wrap(c.note, width);
  const double top = kTop + 15 * static_cast<double>(note_lines.size() > 1 ? note_lines.size() - 1 : 0);
  const Frame f = panel_frame(c, kLeft, width - kRight, y0 + top, y0 + height - kBottom);
  draw_title(out, c, note_lines, f.left, y0);
  draw_axes(out, c, f);
  draw_markers(out, c, f);
  draw_series(out, c, f);
  draw_legend(out, c, f);
}

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (!(hi > lo) || !std::isfinite(lo) || !std::isfinite(hi)) return {lo};
  const double raw = (hi - lo) / std::max(1, target);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * mag;
    if (step >= raw) break;
  }
  std::vector<double> out;
  const double first = std::floor(lo / step + 1e-9);
  const double last = std::ceil(hi / step - 1e-9);
  for (double k = first; k <= last + 1e-9; k += 1) out.push_back(k == 0 ? 0.0 : k * step);
  return out;
}

std::string format_tick(double v, AxisFormat format) {
  if (!std::isfinite(v)) return "";
  const double a = std::abs(v);
  if (format == AxisFormat::kTokens && a >= 1024) {
    if (a >= 1048576 && std::fmod(a, 1048576) == 0) return format_number(v / 1048576, 0) + "M";
    return format_number(v / 1024, 1) + "k";
  }
  if (a >= 1e6) return format_number(v / 1e6, 1) + "M";
  if (a >= 1e4) return format_number(v / 1e3, 0) + "k";
  if (a >= 1e3) return format_number(v / 1e3, 1) + "k";
  if (a >= 10 || a == 0) return format_number(v, 0);
  if (a >= 1) return format_number(v, 1);
  return format_number(v, 3);
}

std::string render_svg(std::span<const SvgChart> panels, int width, int panel_height) {
  const double w = width, h = panel_height;
  const double total = h * static_cast<double>(std::max<size_t>(1, panels.size()));
  std::string out = fmt::format(
      R"(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" viewBox="0 0 {} {}" font-family="Helvetica, Arial, sans-serif">)",
      width, num(total), width, num(total));
  out += '\n';
  if (!panels.empty()) out += "<title>" + xml_escape(panels.front().title) + "</title>\n";
  out += fmt::format(R"(<rect width="{}" height="{}" fill="white"/>)", width, num(total));
  out += '\n';
  for (size_t i = 0; i < panels.size(); ++i) render_panel(out, panels[i], h * static_cast<double>(i), w, h);
  out += "</svg>\n";
  return out;
}

}  // namespace kvgate::bench
