// tests/report/html_report_test.cpp — the report page: its data block equals the input files (read
// here independently, line by line), one chart per metric and per bench preset, the bench table's
// memory columns, escaping, and the output-path checks and writer.
#include "graphed/report/html_report.h"

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include "report/report_fixtures.h"

#include "error_text.h"
#include "graphed/util/file_system.h"

namespace graphed::report {
namespace {

using nlohmann::json;
using testing::error_text;

using test_fixtures::kFixtures;

std::string read_text(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

/// The JSON of <script type="application/json" id="report-data">.
json report_data(const std::string& html) {
  const std::string open = std::string("<script type=\"application/json\" id=\"") + kReportDataId + "\">";
  const std::size_t start = html.find(open);
  EXPECT_NE(start, std::string::npos);
  const std::size_t end = html.find("</script>", start);
  return json::parse(html.substr(start + open.size(), end - start - open.size()));
}

/// metric -> [[iteration, value], ...] straight from a metrics file.
json metrics_of_file(const std::string& path) {
  json metrics = json::object();
  std::istringstream lines(read_text(path));
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    const json record = json::parse(line);
    for (const auto& [key, value] : record.items()) {
      if (key != "iteration") metrics[key].push_back({record.at("iteration"), value});
    }
  }
  return metrics;
}

std::size_t count(const std::string& text, const std::string& part) {
  std::size_t found = 0;
  for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++found;
  return found;
}

ReportInputs fixture_inputs() {
  return read_report_inputs({kFixtures + "run-a", kFixtures + "run-b.jsonl", kFixtures + "bench-tiny.json",
                             kFixtures + "reference-tiny.json"});
}

TEST(HtmlReportTest, DataBlockEqualsTheInputFiles) {
  const HtmlReport report = render_html_report(fixture_inputs());
  const json data = report_data(report.html);
  ASSERT_EQ(data.at("runs").size(), 2u);
  const std::string files[] = {kFixtures + "run-a/metrics.jsonl", kFixtures + "run-b.jsonl"};
  for (std::size_t r = 0; r < 2; ++r) {
    const json expected = metrics_of_file(files[r]);
    const json& run = data.at("runs")[r];
    EXPECT_EQ(run.at("path"), files[r]);
    for (const char* metric : {"loss", "valid_loss", "lr", "grad_norm", "tokens_per_s"}) {
      EXPECT_EQ(run.at("metrics").at(metric), expected.at(metric)) << files[r] << " " << metric;
    }
  }
  const std::string bench_files[] = {kFixtures + "bench-tiny.json", kFixtures + "reference-tiny.json"};
  ASSERT_EQ(data.at("bench_files").size(), 2u);
  for (std::size_t b = 0; b < 2; ++b) {
    const json expected = json::parse(read_text(bench_files[b]));
    const json& rows = data.at("bench_files")[b].at("rows");
    ASSERT_EQ(rows.size(), expected.size());
    for (std::size_t i = 0; i < rows.size(); ++i) {
      for (const auto& [key, value] : rows[i].items()) EXPECT_EQ(value, expected[i].at(key)) << bench_files[b] << key;
      EXPECT_TRUE(rows[i].contains("reserved_mib"));
    }
  }
}

TEST(HtmlReportTest, OneChartPerMetricAndPerBenchPreset) {
  const HtmlReport report = render_html_report(fixture_inputs());
  EXPECT_EQ(report.charts, 6);  // 5 metrics; bench-tiny and reference-tiny share preset tiny
  EXPECT_EQ(count(report.html, "<svg "), 6u);
  const json charts = report_data(report.html).at("charts");
  ASSERT_EQ(charts.size(), 6u);
  EXPECT_EQ(charts[0].at("metric"), "loss");
  EXPECT_EQ(charts[0].at("series"), json({"run-a", "run-b.jsonl"}));
  EXPECT_EQ(charts[4].at("metric"), "tokens_per_s");
  EXPECT_EQ(charts[5].at("kind"), "bar");
  EXPECT_EQ(charts[5].at("files").size(), 2u);
  // Each run keeps its colour in every chart: run-a's polylines are all the first colour.
  EXPECT_EQ(count(report.html, "data-series=\"run-a\">\n<polyline fill=\"none\" stroke=\"#1f77b4\""), 5u);
  EXPECT_EQ(count(report.html, "data-series=\"run-b.jsonl\">\n<polyline fill=\"none\" stroke=\"#d62728\""), 5u);
}

TEST(HtmlReportTest, SkippedBenchRowsAreListedUnderTheirChart) {
  const std::string path = ::testing::TempDir() + "bench-skipped.json";
  std::ofstream(path) << R"([{"impl": "none", "ms_per_iter": 2.5, "preset": "tiny"},
                             {"impl": "local", "skipped": "needs a CUDA device", "preset": "tiny"}])";
  const std::string html = render_html_report(read_report_inputs({path})).html;
  EXPECT_NE(html.find("<p class=\"note\">bench-skipped.json: local skipped: needs a CUDA device</p>"),
            std::string::npos);
}

TEST(HtmlReportTest, InputsAreListedWithPathsAndRecordCounts) {
  const std::string html = render_html_report(fixture_inputs()).html;
  EXPECT_NE(html.find("<code>" + kFixtures + "run-a/metrics.jsonl</code></td><td class=\"num\">12</td>"),
            std::string::npos);
  EXPECT_NE(html.find("<code>" + kFixtures + "run-b.jsonl</code></td><td class=\"num\">10</td>"), std::string::npos);
  EXPECT_NE(html.find("<code>" + kFixtures + "bench-tiny.json</code></td><td class=\"num\">4</td>"), std::string::npos);
  EXPECT_NE(html.find("<p class=\"summary\">2 training runs, 2 bench files, 6 charts."), std::string::npos);
}

TEST(HtmlReportTest, BenchTableHasTheMemoryColumnsAndReferenceRows) {
  const std::string html = render_html_report(fixture_inputs()).html;
  for (const char* header :
       {"<th>peak MiB</th>", "<th>reserved MiB</th>", "<th>graph pool MiB</th>", "<th>graphs MiB</th>"}) {
    EXPECT_NE(html.find(header), std::string::npos) << header;
  }
  EXPECT_NE(html.find("<tr><td>pytorch eager</td><td>reference-tiny.json</td><td class=\"num\">5.768</td>"),
            std::string::npos);
  EXPECT_NE(html.find("<tr><td>local</td><td>bench-tiny.json</td><td class=\"num\">0.478</td>"), std::string::npos);
  EXPECT_NE(html.find("<title>pytorch eager: ms/iter (synchronized, median) 5.768</title>"), std::string::npos);
  EXPECT_NE(html.find(">PyTorch reference</text>"), std::string::npos);
}

TEST(HtmlReportTest, AMetricNoRunHasGetsANoteInsteadOfAChart) {
  ReportInputs inputs;
  inputs.runs = parse_metrics_lines("{\"iteration\": 5, \"loss\": 3, \"lr\": 0.1}\n", "m.jsonl", "m.jsonl");
  const HtmlReport report = render_html_report(inputs);
  EXPECT_EQ(report.charts, 2);
  EXPECT_NE(report.html.find("No run has <code>valid_loss</code> records (validation runs with --eval-iters &gt; 0)"),
            std::string::npos);
  EXPECT_EQ(report.html.find("Benchmarks"), std::string::npos);
}

TEST(HtmlReportTest, DataBlockCannotEndTheScriptElement) {
  ReportInputs inputs;
  inputs.runs = parse_metrics_lines("{\"iteration\": 1, \"loss\": 3}\n", "x</script>.jsonl", "x</script>.jsonl");
  const std::string html = render_html_report(inputs).html;
  EXPECT_EQ(count(html, "</script>"), 1u);
  EXPECT_EQ(report_data(html).at("runs")[0].at("name"), "x</script>.jsonl");
}

class ReportOutputTest : public ::testing::Test {
 protected:
  void SetUp() override { directory_ = make_temporary_directory("graphed-report-test"); }
  void TearDown() override { remove_all(directory_); }
  std::string directory_;
};

TEST_F(ReportOutputTest, MissingFolderIsNamed) {
  const std::string path = directory_ + "/no/report.html";
  EXPECT_EQ(error_text<DataError>([&] { check_output_path(path); }),
            "cannot write the report to '" + path + "': folder '" + directory_ +
                "/no' does not exist; fix: create "
                "it, or pass -o with a file in a writable folder, e.g. -o report.html");
}

TEST_F(ReportOutputTest, FolderIsNotAFile) {
  EXPECT_EQ(error_text<DataError>([&] { check_output_path(directory_); }),
            "cannot write the report to '" + directory_ + "': it is a folder; fix: pass a file name, e.g. -o " +
                directory_ + "/report.html");
}

TEST_F(ReportOutputTest, WritesAndReplacesTheFile) {
  const std::string path = directory_ + "/report.html";
  check_output_path(path);
  EXPECT_FALSE(path_exists(path));  // the check creates nothing
  write_report_file(path, "first");
  write_report_file(path, "second");
  EXPECT_EQ(read_text(path), "second");
  EXPECT_EQ(list_files(directory_), std::vector<std::string>{"report.html"});
}

}  // namespace
}  // namespace graphed::report
