// report/html_report.h — the `graphed report` page: one self-contained HTML file (inline CSS and SVG,
// no script but a JSON data block, nothing fetched at view time) with the inputs listed, one line
// chart per training metric (loss, validation loss, learning rate, gradient norm, tokens/s) with every
// run overlaid, and per bench preset a bar chart of ms/iter per implementation (PyTorch reference rows
// included) and a table with the memory columns. Also checks and writes the output file.
#pragma once

#include <string>

#include "graphed/report/report_inputs.h"

namespace graphed::report {

/// The id of the <script type="application/json"> element holding the plotted data: {"runs": [{name,
/// path, records, first_line, metrics: {metric: [[iteration, value], ...]}}], "bench_files": [{name,
/// path, rows: [{impl, ms_per_iter, ...}]}], "charts": [{kind, title, ...}]}.
inline constexpr const char* kReportDataId = "report-data";

struct ReportOptions {
  std::string title = "graphed report";  ///< page title and heading
  std::string generator;                 ///< footer text ("graphed 0.1.0, ..."); none when empty
};

struct HtmlReport {
  std::string html;
  int charts = 0;  ///< line charts (metrics some run has) + bar charts (one per bench preset)
};

/// Builds the page. Runs get colours in argument order, the same in every chart. A metric no run
/// has gets no chart, and a note says so. Bench files whose rows name the same preset share a chart.
HtmlReport render_html_report(const ReportInputs& inputs, const ReportOptions& options = {});

/// Throws DataError when the report could not be written to path: it is a folder, its folder does not
/// exist, or the file or its folder is not writable. Creates and changes nothing.
void check_output_path(const std::string& path);

/// Writes the page to path through a temporary file beside it and a rename. Throws DataError on failure.
void write_report_file(const std::string& path, const std::string& html);

}  // namespace graphed::report
