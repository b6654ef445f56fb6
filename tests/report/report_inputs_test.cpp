// tests/report/report_inputs_test.cpp — what `graphed report` arguments are: run folders, metrics
// files and bench files told apart by a leading '[', unique run names, and the messages for paths
// that are missing, empty or a folder without metrics.jsonl.
#include "graphed/report/report_inputs.h"

#include <fstream>

#include <gtest/gtest.h>

#include "report/report_fixtures.h"

#include "error_text.h"
#include "graphed/util/file_system.h"

namespace graphed::report {
namespace {

using testing::error_text;

using test_fixtures::kFixtures;

class ReportInputsTest : public ::testing::Test {
 protected:
  void SetUp() override { directory_ = make_temporary_directory("graphed-report-test"); }
  void TearDown() override { remove_all(directory_); }
  std::string write(const std::string& name, const std::string& text) {
    const std::string path = join_path(directory_, name);
    std::ofstream(path) << text;
    return path;
  }
  std::string directory_;
};

TEST_F(ReportInputsTest, FoldersFilesAndBenchFilesAreToldApart) {
  const ReportInputs inputs = read_report_inputs({kFixtures + "run-a/", kFixtures + "bench-tiny.json",
                                                  kFixtures + "run-b.jsonl", kFixtures + "reference-tiny.json"});
  ASSERT_EQ(inputs.runs.size(), 2u);
  EXPECT_EQ(inputs.runs[0].name, "run-a");
  EXPECT_EQ(inputs.runs[0].path, kFixtures + "run-a/metrics.jsonl");
  EXPECT_EQ(inputs.runs[0].records, 12);
  EXPECT_EQ(inputs.runs[1].name, "run-b.jsonl");
  EXPECT_EQ(inputs.runs[1].records, 10);
  ASSERT_EQ(inputs.bench_files.size(), 2u);
  EXPECT_EQ(inputs.bench_files[0].name, "bench-tiny.json");
  EXPECT_EQ(inputs.bench_files[1].name, "reference-tiny.json");
}

TEST_F(ReportInputsTest, RunsThatWouldShareANameAreNamedByPath) {
  create_directories(join_path(directory_, "b"));
  const std::string first = write("m.jsonl", "{\"iteration\": 1, \"loss\": 2}\n");
  const std::string second = write("b/m.jsonl", "{\"iteration\": 1, \"loss\": 3}\n{\"iteration\": 0, \"loss\": 4}\n");
  const ReportInputs inputs = read_report_inputs({first, second});
  ASSERT_EQ(inputs.runs.size(), 3u);
  EXPECT_EQ(inputs.runs[0].name, first);
  EXPECT_EQ(inputs.runs[1].name, second);
  EXPECT_EQ(inputs.runs[2].name, "m.jsonl #2");  // unique already
}

TEST_F(ReportInputsTest, BaseNames) {
  EXPECT_EQ(base_name("runs/a/"), "a");
  EXPECT_EQ(base_name("/tmp/m.jsonl"), "m.jsonl");
  EXPECT_EQ(base_name("m.jsonl"), "m.jsonl");
  EXPECT_EQ(base_name("."), ".");
}

TEST_F(ReportInputsTest, MissingPathIsNamed) {
  const std::string missing = join_path(directory_, "nothing.jsonl");
  EXPECT_EQ(error_text<DataError>([&] { read_report_inputs({missing}); }),
            "cannot read '" + missing +
                "': no such file or directory; fix: check the path (graphed report takes "
                "metrics files, folders holding metrics.jsonl and bench JSON files)");
}

TEST_F(ReportInputsTest, FolderWithoutMetricsIsNamed) {
  EXPECT_EQ(error_text<DataError>([&] { read_report_inputs({directory_}); }),
            "folder '" + directory_ +
                "' has no metrics.jsonl; fix: pass the metrics file itself, or train with "
                "--metrics-file " +
                directory_ + "/metrics.jsonl");
}

TEST_F(ReportInputsTest, EmptyFileIsNamed) {
  const std::string empty = write("empty.json", "\n");
  EXPECT_EQ(error_text<DataError>([&] { read_report_inputs({empty}); }),
            "input file '" + empty +
                "' is empty; fix: pass a metrics file written by graphed train --metrics-file "
                "or the output of graphed bench --json (an empty bench file means the bench run failed: see its log)");
}

}  // namespace
}  // namespace graphed::report
