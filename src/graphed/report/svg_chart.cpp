// report/svg_chart.cpp — see report/svg_chart.h. Layout is fixed-pixel inside a viewBox (the page
// scales the SVG to its column); text widths are estimated from character counts, which is enough
// for legends and the bar chart's label column.
#include "graphed/report/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "graphed/util/text.h"

namespace graphed::report {
namespace {

constexpr const char* kFont = "system-ui, -apple-system, 'Segoe UI', Roboto, Helvetica, Arial, sans-serif";
constexpr const char* kGridColor = "#e8e8e8";
constexpr const char* kAxisColor = "#b0b0b0";
constexpr const char* kTextColor = "#444";
constexpr double kCharacterWidth = 6.6;  // estimated width of one character at 12 px
constexpr double kLegendRowHeight = 18;

std::string px(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.2f", value);
  return buffer;
}

/// Decimals that show the step exactly (0.25 -> 2, 20 -> 0), at most 10.
int decimals_for(double step) {
  step = std::fabs(step);
  for (int decimals = 0; decimals < 10; ++decimals) {
    const double scaled = step * std::pow(10.0, decimals);
    if (std::fabs(scaled - std::round(scaled)) < 1e-6 * std::max(1.0, scaled)) return decimals;
  }
  return 10;
}

std::string svg_open(int width, double height, const std::string& title) {
  std::ostringstream out;
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" role=\"img\" viewBox=\"0 0 " << width << ' '
      << px(height) << "\" width=\"" << width << "\" height=\"" << px(height) << "\" font-family=\"" << kFont
      << "\" font-size=\"12\" aria-label=\"" << escape_xml(title) << "\">\n"
      << "<rect class=\"background\" x=\"0\" y=\"0\" width=\"" << width << "\" height=\"" << px(height)
      << "\" fill=\"#ffffff\"/>\n"
      << "<text class=\"title\" x=\"12\" y=\"22\" font-size=\"14\" font-weight=\"600\" fill=\"#222\">"
      << escape_xml(title) << "</text>\n";
  return out.str();
}

/// Rows of legend entries from left to right, wrapped at the width; returns the SVG and its height.
std::string legend_svg(const std::vector<LegendEntry>& entries, double left, double top, double width, double& height) {
  std::ostringstream out;
  double x = left, y = top;
  int rows = entries.empty() ? 0 : 1;
  for (const auto& entry : entries) {
    const double entry_width = 22 + kCharacterWidth * static_cast<double>(entry.label.size()) + 16;
    if (x > left && x + entry_width > left + width) {
      x = left;
      y += kLegendRowHeight;
      ++rows;
    }
    out << "<g class=\"legend-entry\"><rect x=\"" << px(x) << "\" y=\"" << px(y - 9) << "\" width=\"16\" height=\"10\" "
        << "rx=\"2\" fill=\"" << entry.color << "\" fill-opacity=\"" << entry.opacity << "\"/><text x=\"" << px(x + 22)
        << "\" y=\"" << px(y) << "\" fill=\"" << kTextColor << "\">" << escape_xml(entry.label) << "</text></g>\n";
    x += entry_width;
  }
  height = rows * kLegendRowHeight;
  return out.str();
}

std::string vertical_grid(const std::vector<double>& ticks, const LinearScale& x, double top, double bottom) {
  std::ostringstream out;
  const double step = ticks.size() > 1 ? ticks[1] - ticks[0] : 1.0;
  for (double tick : ticks) {
    const double at = x.map(tick);
    out << "<line x1=\"" << px(at) << "\" y1=\"" << px(top) << "\" x2=\"" << px(at) << "\" y2=\"" << px(bottom)
        << "\" stroke=\"" << kGridColor << "\"/>"
        << "<text class=\"tick\" x=\"" << px(at) << "\" y=\"" << px(bottom + 16) << "\" text-anchor=\"middle\" "
        << "font-size=\"11\" fill=\"" << kTextColor << "\">" << escape_xml(format_tick(tick, step)) << "</text>\n";
  }
  return out.str();
}

std::string horizontal_grid(const std::vector<double>& ticks, const LinearScale& y, double left, double right) {
  std::ostringstream out;
  const double step = ticks.size() > 1 ? ticks[1] - ticks[0] : 1.0;
  for (double tick : ticks) {
    const double at = y.map(tick);
    out << "<line x1=\"" << px(left) << "\" y1=\"" << px(at) << "\" x2=\"" << px(right) << "\" y2=\"" << px(at)
        << "\" stroke=\"" << kGridColor << "\"/>"
        << "<text class=\"tick\" x=\"" << px(left - 6) << "\" y=\"" << px(at + 4) << "\" text-anchor=\"end\" "
        << "font-size=\"11\" fill=\"" << kTextColor << "\">" << escape_xml(format_tick(tick, step)) << "</text>\n";
  }
  return out.str();
}

std::string frame_and_x_label(double left, double top, double width, double height, const std::string& x_label) {
  std::ostringstream out;
  out << "<rect class=\"frame\" x=\"" << px(left) << "\" y=\"" << px(top) << "\" width=\"" << px(width)
      << "\" height=\"" << px(height) << "\" fill=\"none\" stroke=\"" << kAxisColor << "\"/>\n"
      << "<text class=\"axis-label\" x=\"" << px(left + width / 2) << "\" y=\"" << px(top + height + 34)
      << "\" text-anchor=\"middle\" fill=\"#666\">" << escape_xml(x_label) << "</text>\n";
  return out.str();
}

std::string line_series_svg(const LineSeries& series, const LineChartOptions& options, const LinearScale& x,
                            const LinearScale& y) {
  std::ostringstream out;
  out << "<g class=\"series\" data-series=\"" << escape_xml(series.label) << "\">\n<polyline fill=\"none\" stroke=\""
      << series.color << "\" stroke-width=\"1.8\" stroke-linejoin=\"round\" points=\"";
  for (std::size_t i = 0; i < series.points.size(); ++i) {
    out << (i ? " " : "") << px(x.map(series.points[i].x)) << ',' << px(y.map(series.points[i].y));
  }
  out << "\"><title>" << escape_xml(series.label) << "</title></polyline>\n";
  if (static_cast<int>(series.points.size()) <= options.max_markers) {
    for (const auto& point : series.points) {
      out << "<circle cx=\"" << px(x.map(point.x)) << "\" cy=\"" << px(y.map(point.y)) << "\" r=\"2.6\" fill=\""
          << series.color << "\"><title>" << escape_xml(series.label) << ": " << escape_xml(options.x_label) << ' '
          << format_value(point.x) << ", " << escape_xml(options.value_name) << ' ' << format_value(point.y)
          << "</title></circle>\n";
    }
  }
  out << "</g>\n";
  return out.str();
}

/// The nice ticks covering every point's coordinate (x or y).
std::vector<double> ticks_of(const std::vector<LineSeries>& series, bool x_axis) {
  double low = std::numeric_limits<double>::infinity(), high = -low;
  for (const auto& line : series) {
    for (const auto& point : line.points) {
      low = std::min(low, x_axis ? point.x : point.y);
      high = std::max(high, x_axis ? point.x : point.y);
    }
  }
  if (!std::isfinite(low)) low = high = 0;  // no points: an empty [0, 1] plot
  return nice_ticks(low, high, x_axis ? 6 : 5);
}

}  // namespace

double LinearScale::map(double value) const {
  return range_min + (value - domain_min) / (domain_max - domain_min) * (range_max - range_min);
}

double LinearScale::invert(double pixel) const {
  return domain_min + (pixel - range_min) / (range_max - range_min) * (domain_max - domain_min);
}

std::vector<double> nice_ticks(double min, double max, int target) {
  if (!(max > min)) {  // one value: widen around it
    if (min == 0) {
      max = 1;
    } else {
      const double pad = std::fabs(min) * 0.05;
      min -= pad;
      max += pad;
    }
  }
  const double raw = (max - min) / std::max(1, target);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double normalized = raw / magnitude;
  const double step = (normalized < 1.5 ? 1 : normalized < 3 ? 2 : normalized < 7 ? 5 : 10) * magnitude;
  const double first = std::floor(min / step + 1e-9) * step;
  const double last = std::ceil(max / step - 1e-9) * step;
  const int count = static_cast<int>(std::lround((last - first) / step));
  std::vector<double> ticks;
  for (int i = 0; i <= count; ++i) {
    double tick = first + i * step;
    if (std::fabs(tick) < step * 1e-9) tick = 0;
    ticks.push_back(tick);
  }
  return ticks;
}

std::string format_tick(double value, double step) {
  if (value == 0) return "0";
  step = std::fabs(step);
  const double magnitude = std::fabs(value);
  if (step < 1e-3) {  // scientific, with the digits the step needs: "6.0e-4", "1.0e-3", "1.5e-3"
    const int step_exponent = static_cast<int>(std::floor(std::log10(step) + 1e-9));
    const int exponent = static_cast<int>(std::floor(std::log10(magnitude) + 1e-9));
    const int decimals =
        std::clamp(exponent - step_exponent + decimals_for(step / std::pow(10.0, step_exponent)), 1, 4);
    return fixed_decimals(value / std::pow(10.0, exponent), decimals) + "e" + std::to_string(exponent);
  }
  if (magnitude >= 1e6) return fixed_decimals(value / 1e6, decimals_for(step / 1e6)) + "M";
  if (magnitude >= 1e4) return fixed_decimals(value / 1e3, decimals_for(step / 1e3)) + "k";
  return fixed_decimals(value, decimals_for(step));
}

std::string format_value(double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.6g", value);
  return buffer;
}

std::string escape_xml(const std::string& text) {
  std::string escaped;
  escaped.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': escaped += "&amp;"; break;
      case '<': escaped += "&lt;"; break;
      case '>': escaped += "&gt;"; break;
      case '"': escaped += "&quot;"; break;
      case '\'': escaped += "&#39;"; break;
      default: escaped += c;
    }
  }
  return escaped;
}

Chart line_chart(const LineChartOptions& options, const std::vector<LineSeries>& series) {
  const double left = 66, right = 18, top = 38;
  const double plot_width = options.width - left - right, plot_height = options.plot_height;
  const std::vector<double> x_ticks = ticks_of(series, true), y_ticks = ticks_of(series, false);
  Chart chart;
  chart.x = {x_ticks.front(), x_ticks.back(), left, left + plot_width};
  chart.y = {y_ticks.front(), y_ticks.back(), top + plot_height, top};

  std::vector<LegendEntry> legend;
  for (const auto& line : series) legend.push_back({line.label, line.color, 1.0});
  double legend_height = 0;
  const std::string legend_part = legend_svg(legend, left, top + plot_height + 58, plot_width, legend_height);

  std::ostringstream out;
  out << svg_open(options.width, top + plot_height + 50 + legend_height + 8, options.title)
      << horizontal_grid(y_ticks, chart.y, left, left + plot_width)
      << vertical_grid(x_ticks, chart.x, top, top + plot_height)
      << frame_and_x_label(left, top, plot_width, plot_height, options.x_label);
  for (const auto& line : series) {
    if (!line.points.empty()) out << line_series_svg(line, options, chart.x, chart.y);
  }
  out << legend_part << "</svg>\n";
  chart.svg = out.str();
  return chart;
}

Chart bar_chart(const BarChartOptions& options, const std::vector<BarRow>& rows) {
  std::size_t longest_label = 0;
  double largest = 0;
  for (const auto& row : rows) {
    longest_label = std::max(longest_label, row.label.size());
    for (double value : row.values) {
      if (std::isfinite(value)) largest = std::max(largest, value);
    }
  }
  const double left = std::clamp(kCharacterWidth * static_cast<double>(longest_label) + 16, 90.0, 250.0);
  const double right = 64, top = 38;  // right: room for the value after the longest bar
  const std::size_t measures = std::max<std::size_t>(1, options.measures.size());
  const double bar_height = measures == 1 ? 16 : 11, bar_gap = 2, row_padding = 10;
  const double row_height = measures * bar_height + (measures - 1) * bar_gap + row_padding;
  const double plot_width = options.width - left - right;
  const double plot_height = std::max(1.0, static_cast<double>(rows.size())) * row_height;
  const std::vector<double> ticks = nice_ticks(0, largest, 5);
  Chart chart;
  chart.x = {0, ticks.back(), left, left + plot_width};

  // A measure's swatch shows its shade in the bars' colour, where every bar has the same one; grey where the
  // colours differ (their own entries say which is which).
  const bool one_colour =
      std::all_of(rows.begin(), rows.end(), [&](const BarRow& row) { return row.color == rows[0].color; });
  const std::string measure_colour = !rows.empty() && one_colour ? rows[0].color : "#555555";
  std::vector<LegendEntry> legend;
  if (options.measures.size() > 1) {
    for (const auto& measure : options.measures) legend.push_back({measure.name, measure_colour, measure.opacity});
  }
  legend.insert(legend.end(), options.legend.begin(), options.legend.end());
  double legend_height = 0;
  const std::string legend_part = legend_svg(legend, left, top + plot_height + 58, plot_width, legend_height);

  std::ostringstream out;
  out << svg_open(options.width, top + plot_height + 50 + legend_height + 8, options.title)
      << vertical_grid(ticks, chart.x, top, top + plot_height)
      << frame_and_x_label(left, top, plot_width, plot_height, options.x_label);
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const BarRow& row = rows[r];
    const double row_top = top + r * row_height + row_padding / 2;
    out << "<g class=\"bar-row\" data-row=\"" << escape_xml(row.label) << "\">\n<text x=\"" << px(left - 8) << "\" y=\""
        << px(row_top + (row_height - row_padding) / 2 + 4) << "\" text-anchor=\"end\" fill=\"#222\">"
        << escape_xml(row.label) << "</text>\n";
    for (std::size_t m = 0; m < row.values.size() && m < measures; ++m) {
      const double value = row.values[m];
      if (!std::isfinite(value)) continue;
      const double y = row_top + m * (bar_height + bar_gap);
      const double end = chart.x.map(value);
      const std::string measure = m < options.measures.size() ? options.measures[m].name : "";
      const double opacity = m < options.measures.size() ? options.measures[m].opacity : 1.0;
      out << "<rect x=\"" << px(left) << "\" y=\"" << px(y) << "\" width=\"" << px(end - left) << "\" height=\""
          << px(bar_height) << "\" fill=\"" << row.color << "\" fill-opacity=\"" << opacity << "\"><title>"
          << escape_xml(row.label) << ": " << escape_xml(measure) << ' ' << format_value(value) << "</title></rect>"
          << "<text x=\"" << px(end + 4) << "\" y=\"" << px(y + bar_height - 2) << "\" font-size=\"10.5\" fill=\""
          << kTextColor << "\">" << fixed_decimals(value, value >= 100 ? 1 : 3) << "</text>\n";
    }
    out << "</g>\n";
  }
  out << legend_part << "</svg>\n";
  chart.svg = out.str();
  return chart;
}

}  // namespace graphed::report
