#include "bench/svg_chart.h"

#include <cmath>

#include <gtest/gtest.h>

#include "util/xml_text.h"

namespace kvgate::bench {
namespace {

size_t count(const std::string& s, std::string_view what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

TEST(SvgChartTest, NiceTicks) {
  EXPECT_EQ(nice_ticks(0, 97, 5), (std::vector<double>{0, 20, 40, 60, 80, 100}));
  const auto unit = nice_ticks(0, 1, 5);
  ASSERT_EQ(unit.size(), 6U);
  for (size_t i = 0; i < unit.size(); ++i) EXPECT_NEAR(unit[i], 0.2 * static_cast<double>(i), 1e-12);
  const auto t = nice_ticks(1200, 5400, 6);
  EXPECT_EQ(t.front(), 1000);
  EXPECT_EQ(t.back(), 6000);
  EXPECT_EQ(t[1] - t[0], 1000);
}

TEST(SvgChartTest, TickLabels) {
  EXPECT_EQ(format_tick(6144, AxisFormat::kTokens), "6k");
  EXPECT_EQ(format_tick(98304, AxisFormat::kTokens), "96k");
  EXPECT_EQ(format_tick(1536, AxisFormat::kTokens), "1.5k");
  EXPECT_EQ(format_tick(1048576, AxisFormat::kTokens), "1M");
  EXPECT_EQ(format_tick(512, AxisFormat::kTokens), "512");
  EXPECT_EQ(format_tick(15000, AxisFormat::kNumber), "15k");
  EXPECT_EQ(format_tick(2500, AxisFormat::kNumber), "2.5k");
  EXPECT_EQ(format_tick(2500000, AxisFormat::kNumber), "2.5M");
  EXPECT_EQ(format_tick(0.25, AxisFormat::kNumber), "0.25");
  EXPECT_EQ(format_tick(0, AxisFormat::kNumber), "0");
}

TEST(SvgChartTest, EscapesText) {
  EXPECT_EQ(util::xml_escape("a<b & \"c\" 'd'>"), "a&lt;b &amp; &quot;c&quot; &apos;d&apos;&gt;");
  EXPECT_EQ(util::xml_escape(std::string("x\x01y")), "x y");
}

SvgChart sample() {
  SvgChart c{.title = "Throughput <test> & more",
             .x_label = "tokens",
             .y_label = "tokens/s",
             .log_x = true,
             .x_format = AxisFormat::kTokens};
  c.series.push_back({.label = "measured",
                      .color = "#123456",
                      .x = {4096, 8192, 16384, 32768},
                      .y = {900, 800, NAN, 100},
                      .crossed = {2}});
  c.series.push_back({.label = "trend",
                      .color = "#777777",
                      .x = {4096, 32768},
                      .y = {900, 600},
                      .dashed = true,
                      .points = false});
  c.markers.push_back({.x = 32768, .label = "cliff: 32k"});
  return c;
}

TEST(SvgChartTest, RendersAStandaloneDocument) {
  const SvgChart c = sample();
  const std::string svg = render_svg(std::span<const SvgChart>(&c, 1), 800, 400);
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"800\" height=\"400\"", 0), 0U)
      << svg.substr(0, 200);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_NE(svg.find("Throughput &lt;test&gt; &amp; more"), std::string::npos);
  EXPECT_EQ(svg.find("<test>"), std::string::npos);
  // The missing value splits the measured line in two; the trend is one dashed line.
  EXPECT_EQ(count(svg, "<polyline"), 3U);
  EXPECT_EQ(count(svg, "stroke-dasharray=\"6 4\""), 2U);      // the trend line and its legend entry
  EXPECT_EQ(count(svg, "<circle"), 3U);                       // measured points with values
  EXPECT_NE(svg.find("failed at 16384"), std::string::npos);  // the cross
  EXPECT_NE(svg.find("cliff: 32k"), std::string::npos);
  // Powers of two on the log axis, labelled as tokens.
  for (const char* label : {">4k<", ">8k<", ">16k<", ">32k<"})
    EXPECT_NE(svg.find(label), std::string::npos) << label;
  // Every element that opens also closes (a cheap well-formedness check).
  EXPECT_EQ(count(svg, "<text"), count(svg, "</text>"));
  EXPECT_EQ(count(svg, "<circle"), count(svg, "</circle>"));
  EXPECT_EQ(svg, render_svg(std::span<const SvgChart>(&c, 1), 800, 400));  // deterministic
}

TEST(SvgChartTest, PointsLandWhereTheAxesSay) {
  // Linear axes: x 0..10 over pixels 78..776 (800 wide, 24 right margin); y 0..100 over
  // 348..62 (400 high, 52 bottom margin, 62 top).
  SvgChart c{.title = "t"};
  c.series.push_back({.label = "s", .x = {0, 10}, .y = {0, 100}});
  const std::string svg = render_svg(std::span<const SvgChart>(&c, 1), 800, 400);
  EXPECT_NE(svg.find("points=\"78,348 776,62\""), std::string::npos) << svg;
}

TEST(SvgChartTest, PanelsStack) {
  const SvgChart panels[] = {sample(), sample()};
  const std::string svg = render_svg(panels, 600, 300);
  EXPECT_NE(svg.find("height=\"600\""), std::string::npos);
  EXPECT_EQ(count(svg, "cliff: 32k"), 2U);
}

}  // namespace
}  // namespace kvgate::bench
