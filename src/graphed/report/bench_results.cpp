// report/bench_results.cpp — see report/bench_results.h.
#include "graphed/report/bench_results.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "graphed/report/detail/input_text.h"
#include "graphed/util/error.h"
#include "graphed/util/text.h"

namespace graphed::report {
namespace {

using nlohmann::json;

constexpr const char* kBenchFix =
    "; fix: pass the output of graphed bench --json or bench/reference_pytorch.py --json (a JSON array of rows)";

std::string row_where(std::size_t index, const std::string& path) {
  return "row " + std::to_string(index + 1) + " of bench file '" + path + "'";
}

/// 1-based line of a byte offset (nlohmann reports the byte after the bad token).
int64_t line_of(const std::string& text, std::size_t byte) {
  const std::size_t end = std::min(byte == 0 ? 0 : byte - 1, text.size());
  return 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(end), '\n');
}

std::optional<double> optional_number(const json& row, const char* key, std::size_t index, const std::string& path) {
  if (!row.contains(key) || row.at(key).is_null()) return std::nullopt;
  if (!row.at(key).is_number()) {
    throw DataError(row_where(index, path) + " has a non-numeric \"" + key +
                    "\": " + detail::excerpt(row.at(key).dump()) + kBenchFix);
  }
  return row.at(key).get<double>();
}

std::string optional_string(const json& row, const char* key) {
  return row.contains(key) && row.at(key).is_string() ? row.at(key).get<std::string>() : std::string();
}

BenchRow parse_row(const json& row, std::size_t index, const std::string& path) {
  if (!row.is_object()) {
    throw DataError(row_where(index, path) + " is not a JSON object: " + detail::excerpt(row.dump()) + kBenchFix);
  }
  if (!row.contains("impl") || !row.at("impl").is_string()) {
    throw DataError(row_where(index, path) + " has no \"impl\" name" + kBenchFix);
  }
  BenchRow result;
  result.impl = row.at("impl").get<std::string>();
  const std::optional<double> ms = optional_number(row, "ms_per_iter", index, path);
  if (!ms) throw DataError(row_where(index, path) + " (" + result.impl + ") has no \"ms_per_iter\"" + kBenchFix);
  result.ms_per_iter = *ms;
  result.pipelined_ms_per_iter = optional_number(row, "pipelined_ms_per_iter", index, path);
  result.host_ms_per_iter = optional_number(row, "host_ms_per_iter", index, path);
  result.tokens_per_s = optional_number(row, "tokens_per_s", index, path);
  result.capture_s = optional_number(row, "capture_s", index, path);
  result.peak_mib = optional_number(row, "peak_mib", index, path);
  result.reserved_mib = optional_number(row, "reserved_mib", index, path);
  result.graph_pool_mib = optional_number(row, "graph_pool_mib", index, path);
  result.graph_mib = optional_number(row, "graph_mib", index, path);
  result.graphs = optional_number(row, "graphs", index, path);
  result.loss = optional_number(row, "loss", index, path);
  result.preset = optional_string(row, "preset");
  result.device = optional_string(row, "device");
  return result;
}

}  // namespace

std::string BenchFile::preset() const {
  for (const auto& row : rows) {
    if (!row.preset.empty()) return row.preset;
  }
  return "";
}

std::string BenchFile::device() const {
  for (const auto& row : rows) {
    if (!row.device.empty()) return row.device;
  }
  return "";
}

BenchFile parse_bench_json(const std::string& text, const std::string& path, const std::string& name) {
  json document;
  try {
    document = json::parse(text);
  } catch (const json::parse_error& error) {
    throw DataError("bench file '" + path + "' is not JSON (line " + std::to_string(line_of(text, error.byte)) + ")" +
                    kBenchFix);
  } catch (const json::exception& error) {  // a number beyond a double (1e999)
    throw DataError("bench file '" + path + "' is not JSON (" + without_library_tag(error.what()) + ")" + kBenchFix);
  }
  if (!document.is_array()) throw DataError("bench file '" + path + "' is not a JSON array of rows" + kBenchFix);
  if (document.empty()) throw DataError("bench file '" + path + "' has no rows" + kBenchFix);
  BenchFile file;
  file.name = name;
  file.path = path;
  for (std::size_t i = 0; i < document.size(); ++i) {
    // A row graphed bench could not time on its machine has nothing to plot; the page lists it.
    if (document[i].is_object() && document[i].contains("skipped")) {
      const json& row = document[i];
      file.skipped.push_back({optional_string(row, "impl"),
                              row["skipped"].is_string() ? row["skipped"].get<std::string>() : row["skipped"].dump()});
      continue;
    }
    file.rows.push_back(parse_row(document[i], i, path));
  }
  if (file.rows.empty())
    throw DataError("bench file '" + path + "' has no timed rows (every row was skipped)" + kBenchFix);
  return file;
}

BenchFile read_bench_file(const std::string& path, const std::string& name) {
  return parse_bench_json(detail::read_input_text(path), path, name);
}

}  // namespace graphed::report
