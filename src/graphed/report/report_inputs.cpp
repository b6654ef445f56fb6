// report/report_inputs.cpp — see report/report_inputs.h.
#include "graphed/report/report_inputs.h"

#include <map>

#include "graphed/report/detail/input_text.h"
#include "graphed/util/error.h"
#include "graphed/util/file_system.h"

namespace graphed::report {
namespace {

void read_run_folder(const std::string& folder, ReportInputs& inputs) {
  const std::string path = join_path(folder, kRunFolderMetricsFile);
  if (!path_exists(path)) {
    throw DataError("folder '" + folder + "' has no " + kRunFolderMetricsFile +
                    "; fix: pass the metrics file itself, or train with --metrics-file " + path);
  }
  for (auto& run : read_metrics_file(path, base_name(folder))) inputs.runs.push_back(std::move(run));
}

void read_input_file(const std::string& path, ReportInputs& inputs) {
  const std::string text = detail::read_input_text(path);
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) {
    throw DataError("input file '" + path +
                    "' is empty; fix: pass a metrics file written by graphed train "
                    "--metrics-file or the output of graphed bench --json (an empty bench file means the bench run "
                    "failed: see its log)");
  }
  if (text[first] == '[') {
    inputs.bench_files.push_back(parse_bench_json(text, path, base_name(path)));
  } else {
    for (auto& run : parse_metrics_lines(text, path, base_name(path))) inputs.runs.push_back(std::move(run));
  }
}

/// Runs that would share a legend label are labelled by their path instead (keeping any " #N").
void make_names_unique(std::vector<TrainingRun>& runs) {
  std::map<std::string, int> uses;
  for (const auto& run : runs) ++uses[run.name];
  for (auto& run : runs) {
    if (uses[run.name] < 2) continue;
    const std::size_t mark = run.name.rfind(" #");
    run.name = run.path + (mark == std::string::npos ? "" : run.name.substr(mark));
  }
}

}  // namespace

std::string base_name(const std::string& path) {
  std::string trimmed = path;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  const std::size_t slash = trimmed.find_last_of('/');
  const std::string name = slash == std::string::npos ? trimmed : trimmed.substr(slash + 1);
  return name.empty() || name == "." || name == ".." ? path : name;
}

ReportInputs read_report_inputs(const std::vector<std::string>& arguments) {
  ReportInputs inputs;
  for (const auto& argument : arguments) {
    if (is_directory(argument)) {
      read_run_folder(argument, inputs);
    } else {
      read_input_file(argument, inputs);
    }
  }
  make_names_unique(inputs.runs);
  return inputs;
}

}  // namespace graphed::report
