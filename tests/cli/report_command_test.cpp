// tests/cli/report_command_test.cpp — `graphed report`: its command line (inputs, -o, --help, bad
// flags), the summary line, and that an unwritable output is reported before any input is read.
#include "graphed/cli/report_command.h"

#include <sstream>

#include <gtest/gtest.h>

#include "error_text.h"
#include "graphed/util/file_system.h"

namespace graphed::cli {
namespace {

using testing::error_text;

const std::string kFixtures = std::string(GRAPHED_SOURCE_DIR) + "/tests/report/fixtures/";

std::vector<std::string> problems_of(const std::vector<std::string>& arguments) {
  try {
    parse_command_line(arguments);
  } catch (const ConfigError& error) {
    return error.details().empty() ? std::vector<std::string>{error.what()} : error.details();
  }
  return {"(no error)"};
}

TEST(ReportCommandTest, InputsAndOutputAreParsed) {
  const CommandLine line = parse_command_line({"report", "a.jsonl", "runs/b", "-o", "out.html", "bench.json"});
  EXPECT_EQ(line.command, "report");
  EXPECT_EQ(line.report_inputs, (std::vector<std::string>{"a.jsonl", "runs/b", "bench.json"}));
  EXPECT_EQ(line.report_output, "out.html");
  EXPECT_EQ(parse_command_line({"report", "a.jsonl", "--output=x.html"}).report_output, "x.html");
  EXPECT_EQ(parse_command_line({"report", "a.jsonl"}).report_output, "report.html");  // the default
}

TEST(ReportCommandTest, HelpListsTheInputsAndOutput) {
  const CommandLine line = parse_command_line({"report", "--help"});
  ASSERT_TRUE(line.early_output.has_value());
  EXPECT_NE(line.early_output->find("-o,--output"), std::string::npos) << *line.early_output;
  EXPECT_NE(line.early_output->find("metrics.jsonl"), std::string::npos);
  const CommandLine top = parse_command_line({"--help"});
  EXPECT_NE(top.early_output->find("report"), std::string::npos);
}

TEST(ReportCommandTest, BadCommandLinesAreNamed) {
  const std::string fix =
      "; fix: graphed report RUN_DIR|METRICS.jsonl|BENCH.json [more ...] -o report.html (see graphed report --help)";
  EXPECT_EQ(problems_of({"report"}), std::vector<std::string>{"graphed report needs at least one input" + fix});
  EXPECT_EQ(problems_of({"report", "a.jsonl", "--num-layers"}),
            std::vector<std::string>{"unknown flag '--num-layers' for graphed report" + fix});
}

class RunReportTest : public ::testing::Test {
 protected:
  void SetUp() override { directory_ = make_temporary_directory("graphed-report-cli-test"); }
  void TearDown() override { remove_all(directory_); }
  std::string directory_;
};

TEST_F(RunReportTest, WritesThePageAndOneSummaryLine) {
  const std::string output = directory_ + "/report.html";
  const CommandLine line = parse_command_line(
      {"report", kFixtures + "run-a", kFixtures + "run-b.jsonl", kFixtures + "bench-tiny.json", "-o", output});
  std::ostringstream out;
  EXPECT_EQ(run_report(line, out), 0);
  EXPECT_EQ(out.str(), "report: wrote " + output + " (2 runs, 1 bench file, 6 charts)\n");
  EXPECT_GT(file_size(output), 10000);
}

TEST_F(RunReportTest, UnwritableOutputIsReportedBeforeTheInputs) {
  const std::string output = directory_ + "/missing/report.html";
  const CommandLine line = parse_command_line({"report", directory_ + "/no-such-input.jsonl", "-o", output});
  std::ostringstream out;
  EXPECT_EQ(error_text<DataError>([&] { run_report(line, out); }),
            "cannot write the report to '" + output + "': folder '" + directory_ +
                "/missing' does not exist; fix: "
                "create it, or pass -o with a file in a writable folder, e.g. -o report.html");
}

TEST_F(RunReportTest, BadInputWritesNothing) {
  const std::string output = directory_ + "/report.html";
  const CommandLine line = parse_command_line({"report", kFixtures + "run-b.jsonl", directory_, "-o", output});
  std::ostringstream out;
  EXPECT_EQ(error_text<DataError>([&] { run_report(line, out); }),
            "folder '" + directory_ +
                "' has no metrics.jsonl; fix: pass the metrics file itself, or train with "
                "--metrics-file " +
                directory_ + "/metrics.jsonl");
  EXPECT_FALSE(path_exists(output));
}

}  // namespace
}  // namespace graphed::cli
