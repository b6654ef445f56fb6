// report/bench_results.h — BenchFile: the rows of one benchmark JSON file. Two writers share one
// shape, a JSON array of row objects: `graphed bench --json` (cli/bench_command.cpp print_json: impl,
// ms_per_iter, pipelined_ms_per_iter, host_ms_per_iter, tokens_per_s, peak_mib, reserved_mib,
// graph_pool_mib, graph_mib, graphs, capture_s, loss, preset, device, ...) and
// `bench/reference_pytorch.py --json` (impl "pytorch eager" etc.; no graph_pool_mib / graph_mib).
// Only "impl" and "ms_per_iter" are required; other fields are optional. No torch, no charts.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace graphed::report {

/// One implementation's timing and memory.
struct BenchRow {
  std::string impl;                             ///< "none", "full_iteration", ..., or "pytorch eager"
  double ms_per_iter = 0;                       ///< median synchronized ms per iteration
  std::optional<double> pipelined_ms_per_iter;  ///< back-to-back iterations, ms each
  std::optional<double> host_ms_per_iter;
  std::optional<double> tokens_per_s;
  std::optional<double> capture_s;
  std::optional<double> peak_mib;
  std::optional<double> reserved_mib;
  std::optional<double> graph_pool_mib;
  std::optional<double> graph_mib;
  std::optional<double> graphs;
  std::optional<double> loss;
  std::string preset;  ///< "" when the row has none
  std::string device;  ///< "" when the row has none

  /// A row of bench/reference_pytorch.py (its impl starts with "pytorch").
  bool is_reference() const { return impl.rfind("pytorch", 0) == 0; }
};

/// The rows of one bench file, in file order.
/// A row `graphed bench` could not time on its machine ({"impl", "skipped": reason}).
struct SkippedBenchRow {
  std::string impl;
  std::string reason;
};

struct BenchFile {
  std::string name;  ///< the file name
  std::string path;
  std::vector<BenchRow> rows;
  std::vector<SkippedBenchRow> skipped;

  /// The first row's preset ("" when none has one): bench files with the same preset share a chart.
  std::string preset() const;
  /// The first row's device ("" when none has one).
  std::string device() const;
};

/// Parses the text of a bench file (path and name label messages and the result). Throws DataError
/// when it is not JSON (naming the line), not an array of objects, has no rows, or a row lacks a
/// string "impl" or a numeric "ms_per_iter", or has a non-numeric value in a known numeric field.
BenchFile parse_bench_json(const std::string& text, const std::string& path, const std::string& name);

/// Reads the file and parses it as above. Throws DataError when it cannot be read.
BenchFile read_bench_file(const std::string& path, const std::string& name);

}  // namespace graphed::report
