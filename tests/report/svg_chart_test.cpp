// tests/report/svg_chart_test.cpp — ticks and their labels, scales, and that the marks of a chart
// map back to the numbers they were drawn from (polyline and marker coordinates, bar widths).
#include "graphed/report/svg_chart.h"

#include <cmath>
#include <regex>
#include <sstream>

#include <gtest/gtest.h>

namespace graphed::report {
namespace {

std::vector<Point> parse_points(const std::string& points) {
  std::vector<Point> parsed;
  std::istringstream in(points);
  std::string pair;
  while (in >> pair) {
    const std::size_t comma = pair.find(',');
    parsed.push_back({std::stod(pair.substr(0, comma)), std::stod(pair.substr(comma + 1))});
  }
  return parsed;
}

std::vector<std::string> matches(const std::string& text, const std::string& pattern, int group = 1) {
  std::vector<std::string> found;
  const std::regex expression(pattern);
  for (auto it = std::sregex_iterator(text.begin(), text.end(), expression); it != std::sregex_iterator(); ++it) {
    found.push_back((*it)[group].str());
  }
  return found;
}

/// Pixels are written with 2 decimals: a data value is exact to half a hundredth of a pixel.
double tolerance(const LinearScale& scale) {
  return 0.006 * std::fabs((scale.domain_max - scale.domain_min) / (scale.range_max - scale.range_min));
}

TEST(SvgChartTest, NiceTicksCoverTheRangeInRoundSteps) {
  EXPECT_EQ(nice_ticks(0, 50, 6), (std::vector<double>{0, 10, 20, 30, 40, 50}));
  EXPECT_EQ(nice_ticks(10, 100, 6), (std::vector<double>{0, 20, 40, 60, 80, 100}));
  EXPECT_EQ(nice_ticks(4.5, 10.8, 5), (std::vector<double>{4, 5, 6, 7, 8, 9, 10, 11}));
  const std::vector<double> lr = nice_ticks(0, 0.001, 5);
  ASSERT_EQ(lr.size(), 6u);
  EXPECT_DOUBLE_EQ(lr[1], 0.0002);
  EXPECT_DOUBLE_EQ(lr.back(), 0.001);
  const std::vector<double> zero = nice_ticks(0, 0, 5);  // only zeros: [0, 1]
  EXPECT_EQ(zero.front(), 0);
  EXPECT_DOUBLE_EQ(zero.back(), 1);
  const std::vector<double> one = nice_ticks(7, 7, 5);  // one value: widened by 5% each side
  EXPECT_LE(one.front(), 6.65);
  EXPECT_GE(one.back(), 7.35);
}

TEST(SvgChartTest, TickLabelsAreReadable) {
  EXPECT_EQ(format_tick(0, 10), "0");
  EXPECT_EQ(format_tick(40, 10), "40");
  EXPECT_EQ(format_tick(0.25, 0.05), "0.25");
  EXPECT_EQ(format_tick(0.6000000000000001, 0.2), "0.6");
  EXPECT_EQ(format_tick(120000, 20000), "120k");
  EXPECT_EQ(format_tick(1250000, 250000), "1.25M");
  EXPECT_EQ(format_tick(0.0006, 0.0002), "6.0e-4");
  EXPECT_EQ(format_tick(0.001, 0.0002), "1.0e-3");
  EXPECT_EQ(format_tick(0.0012, 0.0002), "1.2e-3");
  EXPECT_EQ(format_tick(0.002, 0.0005), "2.0e-3");  // a learning-rate axis once read 20e-4, 15e-4
  EXPECT_EQ(format_tick(0.0015, 0.0005), "1.5e-3");
  EXPECT_EQ(format_tick(-0.0015, 0.0005), "-1.5e-3");
  EXPECT_EQ(format_tick(0.000015, 0.000005), "1.5e-5");
  EXPECT_EQ(format_value(0.000612345678), "0.000612346");
  EXPECT_EQ(format_value(125000), "125000");
}

TEST(SvgChartTest, ScaleMapsAndInverts) {
  const LinearScale y{0, 10, 300, 40};  // SVG y runs down
  EXPECT_DOUBLE_EQ(y.map(0), 300);
  EXPECT_DOUBLE_EQ(y.map(10), 40);
  EXPECT_DOUBLE_EQ(y.map(5), 170);
  EXPECT_DOUBLE_EQ(y.invert(170), 5);
}

TEST(SvgChartTest, LinePointsMapBackToTheData) {
  const std::vector<LineSeries> series{
      {"run-a", "#1f77b4", {{10, 9.2048}, {20, 7.8988}, {30, 6.8295}, {40, 5.9541}}},
      {"run-b", "#d62728", {{10, 10.1}, {25, 8.25}}},
      {"empty", "#2ca02c", {}},
  };
  LineChartOptions options;
  options.title = "Training loss";
  options.value_name = "loss";
  const Chart chart = line_chart(options, series);
  const std::vector<std::string> polylines = matches(chart.svg, "<polyline[^>]* points=\"([^\"]*)\"");
  ASSERT_EQ(polylines.size(), 2u);  // the empty series draws nothing
  for (std::size_t s = 0; s < 2; ++s) {
    const std::vector<Point> pixels = parse_points(polylines[s]);
    ASSERT_EQ(pixels.size(), series[s].points.size());
    for (std::size_t i = 0; i < pixels.size(); ++i) {
      EXPECT_NEAR(chart.x.invert(pixels[i].x), series[s].points[i].x, tolerance(chart.x));
      EXPECT_NEAR(chart.y.invert(pixels[i].y), series[s].points[i].y, tolerance(chart.y));
    }
  }
  // Markers sit on the same points and carry the values as tooltips.
  const std::vector<std::string> cx = matches(chart.svg, "<circle cx=\"([0-9.]+)\" cy=\"([0-9.]+)\"");
  EXPECT_EQ(cx.size(), 6u);
  EXPECT_NEAR(chart.x.invert(std::stod(cx[2])), 30, tolerance(chart.x));
  EXPECT_NE(chart.svg.find("<title>run-a: iteration 30, loss 6.8295</title>"), std::string::npos);
  // The axes hold the data and their ends are tick values.
  EXPECT_LE(chart.x.domain_min, 10);
  EXPECT_GE(chart.x.domain_max, 40);
  EXPECT_LE(chart.y.domain_min, 5.9541);
  EXPECT_GE(chart.y.domain_max, 10.1);
  // The legend names every series, the empty one included.
  for (const char* name : {">run-a</text>", ">run-b</text>", ">empty</text>"}) {
    EXPECT_NE(chart.svg.find(name), std::string::npos) << name;
  }
}

TEST(SvgChartTest, ManyPointsGetALineButNoMarkers) {
  LineSeries line{"long", "#1f77b4", {}};
  for (int i = 0; i < 400; ++i) line.points.push_back({static_cast<double>(i), std::sin(i * 0.1)});
  const Chart chart = line_chart(LineChartOptions{}, {line});
  EXPECT_EQ(chart.svg.find("<circle"), std::string::npos);
  EXPECT_EQ(parse_points(matches(chart.svg, "points=\"([^\"]*)\"").at(0)).size(), 400u);
}

TEST(SvgChartTest, BarWidthsMapBackToTheValues) {
  BarChartOptions options;
  options.title = "ms/iter";
  options.measures = {{"ms/iter", 1.0}, {"pipelined ms/iter", 0.45}};
  const std::vector<BarRow> rows{{"none", "#1f77b4", {3.698, 3.408}},
                                 {"pytorch eager", "#ff7f0e", {5.768, std::nan("")}},
                                 {"full_iteration", "#1f77b4", {0.445, 0.408}}};
  const Chart chart = bar_chart(options, rows);
  const std::regex bar(
      "<rect x=\"([0-9.]+)\" y=\"[0-9.]+\" width=\"([0-9.]+)\" height=\"[0-9.]+\" fill=\"[^\"]+\" "
      "fill-opacity=\"[^\"]+\"><title>([^<]*)</title>");
  std::vector<double> widths;
  std::vector<std::string> titles;
  for (auto it = std::sregex_iterator(chart.svg.begin(), chart.svg.end(), bar); it != std::sregex_iterator(); ++it) {
    EXPECT_NEAR(std::stod((*it)[1].str()), chart.x.range_min, 0.006);
    widths.push_back(std::stod((*it)[2].str()));
    titles.push_back((*it)[3].str());
  }
  const std::vector<double> expected{3.698, 3.408, 5.768, 0.445, 0.408};  // NaN: no bar
  ASSERT_EQ(widths.size(), expected.size());
  for (std::size_t i = 0; i < widths.size(); ++i) {
    EXPECT_NEAR(chart.x.invert(chart.x.range_min + widths[i]), expected[i], tolerance(chart.x));
  }
  EXPECT_EQ(titles[2], "pytorch eager: ms/iter 5.768");
  EXPECT_EQ(chart.x.domain_min, 0);
  EXPECT_GE(chart.x.domain_max, 5.768);
}

/// Bars all of one colour: the measures' swatches are that colour (they once stayed grey beside blue bars); bars of
/// several colours keep grey measure swatches, and the colours get entries of their own.
TEST(SvgChartTest, MeasureSwatchesTakeTheBarsColour) {
  BarChartOptions options;
  options.measures = {{"ms/iter", 1.0}, {"pipelined ms/iter", 0.45}};
  const std::string swatch =
      "<g class=\"legend-entry\"><rect x=\"[0-9.]+\" y=\"[0-9.]+\" width=\"16\" height=\"10\" rx=\"2\" "
      "fill=\"([^\"]+)\"";
  const Chart blue = bar_chart(options, {{"none", "#1f77b4", {3.0, 2.5}}, {"local", "#1f77b4", {1.0, 0.9}}});
  EXPECT_EQ(matches(blue.svg, swatch), (std::vector<std::string>{"#1f77b4", "#1f77b4"}));
  options.legend = {{"graphed", "#1f77b4", 1.0}, {"PyTorch reference", "#ff7f0e", 1.0}};
  const Chart mixed = bar_chart(options, {{"none", "#1f77b4", {3.0, 2.5}}, {"eager", "#ff7f0e", {5.0, 4.0}}});
  EXPECT_EQ(matches(mixed.svg, swatch), (std::vector<std::string>{"#555555", "#555555", "#1f77b4", "#ff7f0e"}));
}

TEST(SvgChartTest, TextIsEscaped) {
  EXPECT_EQ(escape_xml("a<b & \"c\" 'd'>"), "a&lt;b &amp; &quot;c&quot; &#39;d&#39;&gt;");
  const Chart chart = line_chart(LineChartOptions{}, {{"<run>", "#1f77b4", {{1, 2}}}});
  EXPECT_EQ(chart.svg.find("<run>"), std::string::npos);
  EXPECT_NE(chart.svg.find("&lt;run&gt;"), std::string::npos);
}

}  // namespace
}  // namespace graphed::report
