// report/run_metrics.h — TrainingRun: the records of one training run, read from the JSON-lines file
// that `graphed train --metrics-file FILE` appends to (train/trainer.cpp write_metrics): interval
// records {iteration, lr, loss, grad_norm, ms_per_iter, tokens_per_s, tflops} and validation records
// {iteration, valid_loss}. Plain data only: no torch, no charts (report/svg_chart.h draws them).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace graphed::report {

/// One value of one metric at one iteration.
struct MetricPoint {
  double iteration = 0;
  double value = 0;
};

/// The records of one training run.
struct TrainingRun {
  std::string name;        ///< legend label: the file or folder name (" #2" etc. for a later run in the same file)
  std::string path;        ///< the metrics file it was read from
  int64_t records = 0;     ///< JSON lines that belong to this run
  int64_t first_line = 1;  ///< line of the file where this run starts (1-based)
  /// Every numeric field but "iteration" ("loss", "valid_loss", "lr", ...) -> its points in file order.
  /// A null value (the trainer writes NaN as null) is skipped.
  std::map<std::string, std::vector<MetricPoint>> metrics;

  /// The points of one metric; empty when the run has none.
  const std::vector<MetricPoint>& points(const std::string& metric) const;
};

/// Parses metrics JSON lines (text of the file at path; path and name label messages and runs).
/// Blank lines are skipped. The trainer appends, so one file can hold several runs: a record whose
/// iteration is lower than the previous record's starts a new run, named "NAME #2", "NAME #3", ...
/// Throws DataError for a text without records, a line that is not a JSON object, a record without a numeric
/// "iteration", or a field that is neither a number nor null.
std::vector<TrainingRun> parse_metrics_lines(const std::string& text, const std::string& path, const std::string& name);

/// Reads the file and parses it as above. Throws DataError when it cannot be read.
std::vector<TrainingRun> read_metrics_file(const std::string& path, const std::string& name);

}  // namespace graphed::report
