// report/svg_chart.h — line and horizontal-bar charts as self-contained SVG strings (no script, no
// external style): linear axes with "nice" ticks (1, 2 or 5 x 10^k), light grid lines, a legend
// under the plot, and a <title> tooltip on every marker and bar. Knows nothing of runs or bench
// files; report/html_report.cpp turns those into series and rows.
#pragma once

#include <string>
#include <vector>

namespace graphed::report {

struct Point {
  double x = 0;
  double y = 0;
};

/// A linear map from data values (domain) to SVG pixels (range); the range may run backwards (y).
struct LinearScale {
  double domain_min = 0;
  double domain_max = 1;
  double range_min = 0;
  double range_max = 1;

  double map(double value) const;
  double invert(double pixel) const;
};

/// About target evenly spaced "nice" tick values (steps of 1, 2 or 5 x 10^k) whose first is <= min
/// and whose last is >= max. A zero-width range is widened first (by 5%, or to [0, 1] around 0).
std::vector<double> nice_ticks(double min, double max, int target = 5);

/// A tick label that is readable at the ticks' step: "0.25", "120k", "1.5M"; below a step of 1e-3 in
/// units of the step's power of ten, so one axis shares one exponent ("8e-4", "10e-4").
std::string format_tick(double value, double step);

/// A value as a tooltip shows it: 6 significant digits ("0.000612", "10.8237", "125000").
std::string format_value(double value);

/// One entry of a chart's legend.
struct LegendEntry {
  std::string label;
  std::string color;  ///< any SVG colour ("#1f77b4")
  double opacity = 1.0;
};

/// One line of a line chart.
struct LineSeries {
  std::string label;  ///< legend text and tooltip prefix
  std::string color;
  std::vector<Point> points;  ///< drawn in the given order
};

struct LineChartOptions {
  std::string title;
  std::string x_label = "iteration";
  std::string value_name;  ///< tooltips: "run: iteration 20, <value_name> 4.5"
  int width = 580;         ///< pixels of the whole SVG (its viewBox; the page scales it)
  int plot_height = 210;   ///< pixels of the plot area
  /// Series with more points than this get a line but no markers (each marker carries a tooltip).
  int max_markers = 300;
};

/// One row (implementation) of a horizontal-bar chart: one bar per measure.
struct BarRow {
  std::string label;
  std::string color;
  /// One value per measure (BarChartOptions::measures); NaN where the row has no value (no bar).
  std::vector<double> values;
};

struct BarMeasure {
  std::string name;      ///< legend and tooltip text ("ms/iter")
  double opacity = 1.0;  ///< bars of this measure are drawn in the row colour at this opacity
};

struct BarChartOptions {
  std::string title;
  std::string x_label;               ///< "milliseconds per iteration"
  std::vector<BarMeasure> measures;  ///< one bar per measure and row, in this order
  std::vector<LegendEntry> legend;   ///< extra entries (e.g. the row colours' meaning)
  int width = 580;
};

/// An SVG chart and the scales its marks were placed with (tests map coordinates back through them).
struct Chart {
  std::string svg;
  LinearScale x;
  LinearScale y;  ///< line charts only
};

/// Lines over shared axes (domains from all points). A series with one point shows as a marker.
/// Series without points are left out of the plot but kept in the legend.
Chart line_chart(const LineChartOptions& options, const std::vector<LineSeries>& series);

/// Horizontal bars from 0, one group per row, top to bottom in the given order, each bar labelled
/// with its value. The x domain runs from 0 to a nice bound above the largest value.
Chart bar_chart(const BarChartOptions& options, const std::vector<BarRow>& rows);

/// Text escaped for SVG/HTML content and attribute values (& < > " ').
std::string escape_xml(const std::string& text);

}  // namespace graphed::report
