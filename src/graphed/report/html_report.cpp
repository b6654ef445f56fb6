// report/html_report.cpp — see report/html_report.h. The page is built section by section: inputs,
// training charts, bench charts and tables, footer, data block.
#include "graphed/report/html_report.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "graphed/report/detail/input_text.h"
#include "graphed/report/svg_chart.h"
#include "graphed/util/error.h"
#include "graphed/util/file_system.h"
#include "graphed/util/text.h"

namespace graphed::report {
namespace {

using nlohmann::json;

/// The training charts, in page order.
struct MetricChartSpec {
  const char* metric;  ///< field of the metrics records
  const char* title;
  const char* value_name;  ///< tooltip name of the value
};
constexpr MetricChartSpec kMetricCharts[] = {
    {"loss", "Training loss", "loss"},
    {"valid_loss", "Validation loss", "validation loss"},
    {"lr", "Learning rate", "lr"},
    {"grad_norm", "Gradient norm", "grad norm"},
    {"tokens_per_s", "Throughput (tokens/s)", "tokens/s"},
};

/// Run colours (Tableau 10), in argument order; the 11th run reuses the first colour.
constexpr const char* kRunColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                      "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};
constexpr const char* kGraphedBarColor = "#1f77b4";
constexpr const char* kReferenceBarColor = "#ff7f0e";

constexpr const char* kStyle = R"(
body { margin: 0; background: #f6f7f9; color: #222;
       font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif; }
main { max-width: 1220px; margin: 0 auto; padding: 20px 24px 32px; }
h1 { font-size: 22px; margin: 0 0 2px; }
h2 { font-size: 17px; margin: 26px 0 10px; }
p.summary { color: #555; margin: 0 0 8px; }
p.note { color: #666; font-size: 13px; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(520px, 1fr)); gap: 16px; }
.card { background: #fff; border: 1px solid #e3e5e8; border-radius: 8px; padding: 8px; margin: 0 0 16px; }
.grid .card { margin: 0; }
.bench .chart { max-width: 760px; }
svg.chart { width: 100%; height: auto; display: block; }
table { border-collapse: collapse; background: #fff; font-size: 13px; }
th, td { padding: 4px 8px; border-bottom: 1px solid #eceef0; text-align: left; white-space: nowrap; }
th { background: #f0f2f4; font-weight: 600; vertical-align: bottom; }
.bench th { white-space: normal; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.table-wrap { overflow-x: auto; }
.swatch { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 6px; }
code { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12.5px; }
footer { color: #888; font-size: 12px; margin-top: 28px; }
)";

std::string color_of_run(std::size_t index) { return kRunColors[index % (sizeof(kRunColors) / sizeof(*kRunColors))]; }

/// A table cell; thousands are grouped ("148,217") and a missing value shows as "-".
std::string number_cell(const std::optional<double>& value, int decimals) {
  if (!value) return "<td class=\"num\">-</td>";
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.*f", decimals, *value);
  std::string text = buffer;
  const std::size_t digits_end = std::min(text.find('.'), text.size());
  const std::size_t digits_start = text[0] == '-' ? 1 : 0;
  for (std::size_t at = digits_end; at > digits_start + 3; at -= 3) text.insert(at - 3, ",");
  return "<td class=\"num\">" + text + "</td>";
}

std::string iteration_span(const TrainingRun& run) {
  double first = std::numeric_limits<double>::infinity(), last = -first;
  for (const auto& [metric, points] : run.metrics) {
    for (const auto& point : points) {
      first = std::min(first, point.iteration);
      last = std::max(last, point.iteration);
    }
  }
  if (!std::isfinite(first)) return "no values";
  return "iterations " + format_value(first) + "&ndash;" + format_value(last);
}

// ---- inputs ----

std::string inputs_section(const ReportInputs& inputs) {
  std::ostringstream out;
  out << "<section class=\"inputs\"><h2>Inputs</h2><div class=\"table-wrap\"><table>\n"
      << "<tr><th>kind</th><th>name</th><th>path</th><th>records</th><th>contents</th></tr>\n";
  for (std::size_t i = 0; i < inputs.runs.size(); ++i) {
    const TrainingRun& run = inputs.runs[i];
    out << "<tr><td>training run</td><td><span class=\"swatch\" style=\"background:" << color_of_run(i) << "\"></span>"
        << escape_xml(run.name) << "</td><td><code>" << escape_xml(run.path) << "</code>"
        << (run.first_line > 1 ? " from line " + std::to_string(run.first_line) : "") << "</td><td class=\"num\">"
        << run.records << "</td><td>" << iteration_span(run) << "</td></tr>\n";
  }
  for (const auto& file : inputs.bench_files) {
    std::string contents = "preset " + (file.preset().empty() ? std::string("(none)") : file.preset());
    if (!file.device().empty()) contents += ", " + file.device();
    out << "<tr><td>bench file</td><td>" << escape_xml(file.name) << "</td><td><code>" << escape_xml(file.path)
        << "</code></td><td class=\"num\">" << file.rows.size() << "</td><td>" << escape_xml(contents)
        << "</td></tr>\n";
  }
  out << "</table></div></section>\n";
  return out.str();
}

// ---- training charts ----

std::vector<LineSeries> series_of(const ReportInputs& inputs, const std::string& metric) {
  std::vector<LineSeries> series;
  for (std::size_t i = 0; i < inputs.runs.size(); ++i) {
    LineSeries line{inputs.runs[i].name, color_of_run(i), {}};
    for (const auto& point : inputs.runs[i].points(metric)) line.points.push_back({point.iteration, point.value});
    series.push_back(std::move(line));
  }
  return series;
}

std::string training_section(const ReportInputs& inputs, json& chart_data, int& charts) {
  if (inputs.runs.empty()) return "";
  std::ostringstream cards;
  std::vector<std::string> missing;
  for (const auto& spec : kMetricCharts) {
    const std::vector<LineSeries> series = series_of(inputs, spec.metric);
    bool any = false;
    for (const auto& line : series) any |= !line.points.empty();
    if (!any) {
      missing.push_back(spec.metric);
      continue;
    }
    LineChartOptions options;
    options.title = spec.title;
    options.value_name = spec.value_name;
    cards << "<figure class=\"card\" id=\"chart-" << spec.metric << "\">" << line_chart(options, series).svg
          << "</figure>\n";
    json names = json::array();
    for (const auto& line : series) {
      if (!line.points.empty()) names.push_back(line.label);
    }
    chart_data.push_back({{"kind", "line"}, {"title", spec.title}, {"metric", spec.metric}, {"series", names}});
    ++charts;
  }
  std::ostringstream out;
  out << "<section class=\"training\"><h2>Training</h2><div class=\"grid\">\n" << cards.str() << "</div>\n";
  for (const auto& metric : missing) {
    out << "<p class=\"note\">No run has <code>" << metric << "</code> records"
        << (metric == std::string("valid_loss") ? " (validation runs with --eval-iters &gt; 0)" : "")
        << ", so it has no chart.</p>\n";
  }
  out << "</section>\n";
  return out.str();
}

// ---- bench charts and tables ----

/// Bench files grouped by preset, in order of first appearance; files without a preset stand alone.
std::vector<std::vector<const BenchFile*>> bench_groups(const std::vector<BenchFile>& files) {
  std::vector<std::vector<const BenchFile*>> groups;
  std::map<std::string, std::size_t> group_of_preset;
  for (const auto& file : files) {
    const std::string preset = file.preset();
    if (!preset.empty() && group_of_preset.count(preset)) {
      groups[group_of_preset[preset]].push_back(&file);
      continue;
    }
    if (!preset.empty()) group_of_preset[preset] = groups.size();
    groups.push_back({&file});
  }
  return groups;
}

struct LabelledRow {
  const BenchRow* row;
  const BenchFile* file;
  std::string label;  ///< impl, or "impl (file)" where the impl repeats in the group
};

/// The group's rows, PyTorch reference rows first (as bench/compare.py lists them), each in file order.
std::vector<LabelledRow> labelled_rows(const std::vector<const BenchFile*>& group) {
  std::map<std::string, int> uses;
  for (const auto* file : group) {
    for (const auto& row : file->rows) ++uses[row.impl];
  }
  std::vector<LabelledRow> rows;
  for (const bool reference : {true, false}) {
    for (const auto* file : group) {
      for (const auto& row : file->rows) {
        if (row.is_reference() != reference) continue;
        rows.push_back({&row, file, uses[row.impl] > 1 ? row.impl + " (" + file->name + ")" : row.impl});
      }
    }
  }
  return rows;
}

std::string bench_title(const std::vector<const BenchFile*>& group) {
  const BenchFile& first = *group.front();
  std::string title = "ms/iter per implementation";
  if (!first.preset().empty()) title += " \xE2\x80\x94 preset " + first.preset();
  if (!first.device().empty()) title += ", " + first.device();
  return title;
}

Chart bench_chart(const std::vector<const BenchFile*>& group, const std::vector<LabelledRow>& rows) {
  bool pipelined = false, reference = false, graphed = false;
  for (const auto& entry : rows) {
    pipelined |= entry.row->pipelined_ms_per_iter.has_value();
    (entry.row->is_reference() ? reference : graphed) = true;
  }
  BarChartOptions options;
  options.title = bench_title(group);
  options.x_label = "milliseconds per iteration (shorter is faster)";
  options.width = 760;
  options.measures.push_back({"ms/iter (synchronized, median)", 1.0});
  if (pipelined) options.measures.push_back({"pipelined ms/iter", 0.45});
  if (graphed) options.legend.push_back({"graphed", kGraphedBarColor, 1.0});
  if (reference) options.legend.push_back({"PyTorch reference", kReferenceBarColor, 1.0});
  std::vector<BarRow> bars;
  for (const auto& entry : rows) {
    BarRow bar{
        entry.label, entry.row->is_reference() ? kReferenceBarColor : kGraphedBarColor, {entry.row->ms_per_iter}};
    if (pipelined) bar.values.push_back(entry.row->pipelined_ms_per_iter.value_or(std::nan("")));
    bars.push_back(std::move(bar));
  }
  return bar_chart(options, bars);
}

std::string bench_table(const std::vector<LabelledRow>& rows) {
  std::ostringstream out;
  out << "<div class=\"table-wrap\"><table>\n<tr><th>impl</th><th>file</th><th>ms/iter</th><th>pipelined ms/iter</th>"
         "<th>host ms/iter</th><th>tokens/s</th><th>peak MiB</th><th>reserved MiB</th><th>graph pool MiB</th>"
         "<th>graphs MiB</th><th>graphs</th><th>capture s</th><th>loss</th></tr>\n";
  for (const auto& entry : rows) {
    const BenchRow& row = *entry.row;
    out << "<tr><td>" << escape_xml(entry.label) << "</td><td>" << escape_xml(entry.file->name) << "</td>"
        << number_cell(row.ms_per_iter, 3) << number_cell(row.pipelined_ms_per_iter, 3)
        << number_cell(row.host_ms_per_iter, 3) << number_cell(row.tokens_per_s, 0) << number_cell(row.peak_mib, 1)
        << number_cell(row.reserved_mib, 1) << number_cell(row.graph_pool_mib, 1) << number_cell(row.graph_mib, 1)
        << number_cell(row.graphs, 0) << number_cell(row.capture_s, 2) << number_cell(row.loss, 4) << "</tr>\n";
  }
  out << "</table></div>\n";
  return out.str();
}

std::string bench_section(const ReportInputs& inputs, json& chart_data, int& charts) {
  if (inputs.bench_files.empty()) return "";
  std::ostringstream out;
  out << "<section class=\"bench\"><h2>Benchmarks</h2>\n";
  for (const auto& group : bench_groups(inputs.bench_files)) {
    const std::vector<LabelledRow> rows = labelled_rows(group);
    out << "<figure class=\"card\">" << bench_chart(group, rows).svg << bench_table(rows);
    for (const auto* file : group) {
      for (const auto& skipped : file->skipped) {
        out << "<p class=\"note\">" << escape_xml(file->name) << ": " << escape_xml(skipped.impl)
            << " skipped: " << escape_xml(skipped.reason) << "</p>\n";
      }
    }
    out << "</figure>\n";
    json paths = json::array();
    for (const auto* file : group) paths.push_back(file->path);
    chart_data.push_back({{"kind", "bar"}, {"title", bench_title(group)}, {"files", paths}});
    ++charts;
  }
  out << "</section>\n";
  return out.str();
}

// ---- data block ----

json run_data(const TrainingRun& run) {
  json metrics = json::object();
  for (const auto& [metric, points] : run.metrics) {
    json values = json::array();
    for (const auto& point : points) values.push_back({point.iteration, point.value});
    metrics[metric] = values;
  }
  return {{"name", run.name},
          {"path", run.path},
          {"records", run.records},
          {"first_line", run.first_line},
          {"metrics", metrics}};
}

json bench_data(const BenchFile& file) {
  json rows = json::array();
  for (const auto& row : file.rows) {
    json entry = {{"impl", row.impl}, {"ms_per_iter", row.ms_per_iter}};
    const std::pair<const char*, const std::optional<double>*> optional[] = {
        {"pipelined_ms_per_iter", &row.pipelined_ms_per_iter},
        {"host_ms_per_iter", &row.host_ms_per_iter},
        {"tokens_per_s", &row.tokens_per_s},
        {"capture_s", &row.capture_s},
        {"peak_mib", &row.peak_mib},
        {"reserved_mib", &row.reserved_mib},
        {"graph_pool_mib", &row.graph_pool_mib},
        {"graph_mib", &row.graph_mib},
        {"graphs", &row.graphs},
        {"loss", &row.loss}};
    for (const auto& [key, value] : optional) {
      if (value->has_value()) entry[key] = **value;
    }
    if (!row.preset.empty()) entry["preset"] = row.preset;
    if (!row.device.empty()) entry["device"] = row.device;
    rows.push_back(entry);
  }
  return {{"name", file.name}, {"path", file.path}, {"rows", rows}};
}

/// JSON that is safe inside <script>: "</" would end the element, so it is written "<\/".
std::string script_safe(const json& data) {
  std::string text = data.dump(-1, ' ', false, json::error_handler_t::replace);
  std::string safe;
  safe.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    safe += text[i];
    if (text[i] == '<' && i + 1 < text.size() && text[i + 1] == '/') safe += '\\';
  }
  return safe;
}

std::string output_error(const std::string& path, const std::string& reason, const std::string& fix) {
  return "cannot write the report to '" + path + "': " + reason + "; fix: " + fix;
}

std::string folder_of(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

HtmlReport render_html_report(const ReportInputs& inputs, const ReportOptions& options) {
  HtmlReport report;
  json charts = json::array();
  const std::string training = training_section(inputs, charts, report.charts);
  const std::string bench = bench_section(inputs, charts, report.charts);
  json data = {{"title", options.title}, {"runs", json::array()}, {"bench_files", json::array()}, {"charts", charts}};
  for (const auto& run : inputs.runs) data["runs"].push_back(run_data(run));
  for (const auto& file : inputs.bench_files) data["bench_files"].push_back(bench_data(file));

  std::ostringstream out;
  out << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      << "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>"
      << escape_xml(options.title) << "</title>\n<style>" << kStyle << "</style>\n</head>\n<body>\n<main>\n<h1>"
      << escape_xml(options.title) << "</h1>\n<p class=\"summary\">" << counted(inputs.runs.size(), "training run")
      << ", " << counted(inputs.bench_files.size(), "bench file") << ", "
      << counted(static_cast<std::size_t>(report.charts), "chart") << ". Hover a point or bar for its value.</p>\n"
      << inputs_section(inputs) << training << bench;
  if (!options.generator.empty()) out << "<footer>" << escape_xml(options.generator) << "</footer>\n";
  out << "</main>\n<script type=\"application/json\" id=\"" << kReportDataId << "\">" << script_safe(data)
      << "</script>\n</body>\n</html>\n";
  report.html = out.str();
  return report;
}

void check_output_path(const std::string& path) {
  const std::string fix = "pass -o with a file in a writable folder, e.g. -o report.html";
  if (path.empty()) throw DataError(output_error(path, "the path is empty", fix));
  if (is_directory(path)) {
    throw DataError(
        output_error(path, "it is a folder", "pass a file name, e.g. -o " + join_path(path, "report.html")));
  }
  const std::string folder = folder_of(path);
  if (!is_directory(folder)) {
    throw DataError(output_error(path, "folder '" + folder + "' does not exist", "create it, or " + fix));
  }
  if (path_exists(path) ? ::access(path.c_str(), W_OK) != 0 : ::access(folder.c_str(), W_OK) != 0) {
    throw DataError(output_error(path, detail::reason_of(errno), fix));
  }
}

void write_report_file(const std::string& path, const std::string& html) {
  std::string step;
  if (const int error = write_file_atomically(path, html, &step)) {
    throw DataError(output_error(path, step + ": " + detail::reason_of(error),
                                 "pass -o with a file in a writable folder that has free space"));
  }
}

}  // namespace graphed::report
