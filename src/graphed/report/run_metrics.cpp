// report/run_metrics.cpp — see report/run_metrics.h.
#include "graphed/report/run_metrics.h"

#include <nlohmann/json.hpp>

#include "graphed/report/detail/input_text.h"
#include "graphed/util/error.h"

namespace graphed::report {
namespace {

using nlohmann::json;

constexpr const char* kMetricsFix =
    "; fix: pass a file written by graphed train --metrics-file FILE (one JSON object per line)";

std::string where(int64_t line, const std::string& path) {
  return "line " + std::to_string(line) + " of metrics file '" + path + "'";
}

/// One line as a JSON object; throws DataError naming the line when it is not one.
json parse_record(const std::string& line, int64_t line_number, const std::string& path) {
  json record;
  try {
    record = json::parse(line);
  } catch (const json::exception&) {  // a syntax error, or a number beyond a double (1e999)
    throw DataError(where(line_number, path) + " is not JSON: " + detail::excerpt(line) + kMetricsFix);
  }
  if (!record.is_object()) {
    throw DataError(where(line_number, path) + " is not a JSON object: " + detail::excerpt(line) + kMetricsFix);
  }
  if (!record.contains("iteration")) {
    throw DataError(where(line_number, path) + " has no \"iteration\": " + detail::excerpt(line) +
                    "; fix: every record needs \"iteration\" (graphed train --metrics-file writes it)");
  }
  for (const auto& [key, value] : record.items()) {
    const bool allowed = value.is_number() || (value.is_null() && key != "iteration");
    if (!allowed) {
      throw DataError(where(line_number, path) + " has a non-numeric \"" + key +
                      "\": " + detail::excerpt(value.dump()) + kMetricsFix);
    }
  }
  return record;
}

bool is_blank(const std::string& line) { return line.find_first_not_of(" \t\r") == std::string::npos; }

}  // namespace

const std::vector<MetricPoint>& TrainingRun::points(const std::string& metric) const {
  static const std::vector<MetricPoint> kNone;
  const auto found = metrics.find(metric);
  return found == metrics.end() ? kNone : found->second;
}

std::vector<TrainingRun> parse_metrics_lines(const std::string& text, const std::string& path,
                                             const std::string& name) {
  std::vector<TrainingRun> runs;
  double previous_iteration = 0;
  int64_t line_number = 0;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    ++line_number;
    if (is_blank(line)) continue;
    const json record = parse_record(line, line_number, path);
    const double iteration = record.at("iteration").get<double>();
    if (runs.empty() || iteration < previous_iteration) {  // the trainer appends: a lower iteration is a new run
      TrainingRun run;
      run.name = runs.empty() ? name : name + " #" + std::to_string(runs.size() + 1);
      run.path = path;
      run.first_line = line_number;
      runs.push_back(std::move(run));
    }
    previous_iteration = iteration;
    TrainingRun& run = runs.back();
    ++run.records;
    for (const auto& [key, value] : record.items()) {
      if (key == "iteration" || value.is_null()) continue;
      run.metrics[key].push_back({iteration, value.get<double>()});
    }
  }
  if (runs.empty()) {
    throw DataError("metrics file '" + path +
                    "' has no records; fix: pass a file written by graphed train "
                    "--metrics-file FILE (it gets a record every --log-interval iterations)");
  }
  return runs;
}

std::vector<TrainingRun> read_metrics_file(const std::string& path, const std::string& name) {
  return parse_metrics_lines(detail::read_input_text(path), path, name);
}

}  // namespace graphed::report
