// report/report_inputs.h — ReportInputs: what `graphed report` was given, read and classified. An
// argument is one of
//   - a folder: its metrics.jsonl is read as a training run named after the folder;
//   - a file whose text starts with '[': a bench file (graphed bench --json, reference_pytorch.py --json);
//   - any other file: a metrics JSON-lines file (graphed train --metrics-file), named after the file.
#pragma once

#include <string>
#include <vector>

#include "graphed/report/bench_results.h"
#include "graphed/report/run_metrics.h"

namespace graphed::report {

/// The file a run folder must hold.
inline constexpr const char* kRunFolderMetricsFile = "metrics.jsonl";

struct ReportInputs {
  std::vector<TrainingRun> runs;       ///< in argument order (a file holding several runs gives several)
  std::vector<BenchFile> bench_files;  ///< in argument order
};

/// Reads every argument as above. Run names are the file or folder names; where two runs would share
/// a name, their paths are used instead. Throws DataError for a missing or unreadable path, a folder
/// without metrics.jsonl, an empty file, or a file the readers reject.
ReportInputs read_report_inputs(const std::vector<std::string>& arguments);

/// The last part of a path, without trailing slashes ("runs/a/" -> "a").
std::string base_name(const std::string& path);

}  // namespace graphed::report
