// tests/report/run_metrics_test.cpp — reading `graphed train --metrics-file` JSON lines: interval and
// validation records, nulls, several runs appended to one file, and every bad-input message.
#include "graphed/report/run_metrics.h"

#include <gtest/gtest.h>

#include "error_text.h"

namespace graphed::report {
namespace {

using testing::error_text;

std::string metrics_parse_error(const std::string& text) {
  return error_text<DataError>([&] { parse_metrics_lines(text, "m.jsonl", "m.jsonl"); });
}

TEST(RunMetricsTest, ReadsIntervalAndValidationRecords) {
  const std::string text =
      "{\"iteration\": 10, \"lr\": 0.0005, \"loss\": 9.25, \"grad_norm\": 1.5, \"ms_per_iter\": 50.0, "
      "\"tokens_per_s\": 40960.0, \"tflops\": 0.01}\n"
      "{\"iteration\": 20, \"lr\": 0.001, \"loss\": 7.5, \"grad_norm\": 1.25, \"ms_per_iter\": 51.0, "
      "\"tokens_per_s\": 40157.0, \"tflops\": 0.01}\n"
      "{\"iteration\": 20, \"valid_loss\": 7.75}\n";
  const std::vector<TrainingRun> runs = parse_metrics_lines(text, "dir/m.jsonl", "m.jsonl");
  ASSERT_EQ(runs.size(), 1u);
  const TrainingRun& run = runs.front();
  EXPECT_EQ(run.name, "m.jsonl");
  EXPECT_EQ(run.path, "dir/m.jsonl");
  EXPECT_EQ(run.records, 3);
  ASSERT_EQ(run.points("loss").size(), 2u);
  EXPECT_EQ(run.points("loss")[0].iteration, 10);
  EXPECT_EQ(run.points("loss")[0].value, 9.25);
  EXPECT_EQ(run.points("loss")[1].value, 7.5);
  EXPECT_EQ(run.points("lr")[1].value, 0.001);
  EXPECT_EQ(run.points("tokens_per_s")[1].value, 40157.0);
  ASSERT_EQ(run.points("valid_loss").size(), 1u);
  EXPECT_EQ(run.points("valid_loss")[0].iteration, 20);
  EXPECT_EQ(run.points("valid_loss")[0].value, 7.75);
  EXPECT_TRUE(run.points("missing").empty());
}

TEST(RunMetricsTest, NullValuesAndBlankLinesAreSkipped) {
  const auto runs = parse_metrics_lines("\n{\"iteration\": 1, \"loss\": null, \"lr\": 1e-4}\n\n", "m", "m");
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].records, 1);
  EXPECT_TRUE(runs[0].points("loss").empty());
  EXPECT_EQ(runs[0].points("lr").size(), 1u);
}

TEST(RunMetricsTest, ALowerIterationStartsANewRun) {
  const std::string text =
      "{\"iteration\": 10, \"loss\": 9}\n{\"iteration\": 20, \"loss\": 8}\n{\"iteration\": 20, \"valid_loss\": 8.5}\n"
      "{\"iteration\": 10, \"loss\": 9.5}\n";
  const auto runs = parse_metrics_lines(text, "m.jsonl", "m.jsonl");
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].name, "m.jsonl");
  EXPECT_EQ(runs[0].records, 3);
  EXPECT_EQ(runs[1].name, "m.jsonl #2");
  EXPECT_EQ(runs[1].records, 1);
  EXPECT_EQ(runs[1].first_line, 4);
  EXPECT_EQ(runs[1].points("loss")[0].value, 9.5);
}

TEST(RunMetricsTest, LineThatIsNotJsonIsNamed) {
  EXPECT_EQ(metrics_parse_error("{\"iteration\": 1, \"loss\": 2}\n\n{\"iteration\": 2, \"loss\": \n"),
            "line 3 of metrics file 'm.jsonl' is not JSON: {\"iteration\": 2, \"loss\": ; fix: pass a file written "
            "by graphed train --metrics-file FILE (one JSON object per line)");
}

TEST(RunMetricsTest, LongBadLineIsCut) {
  EXPECT_EQ(
      metrics_parse_error("iteration,loss,lr,grad_norm,ms_per_iter,tokens_per_s,tflops,valid_loss,more,columns\n"),
      "line 1 of metrics file 'm.jsonl' is not JSON: iteration,loss,lr,grad_norm,ms_per_iter,tokens_per_s,"
      "tflops,...; fix: pass a file written by graphed train --metrics-file FILE (one JSON object per "
      "line)");
}

TEST(RunMetricsTest, LineThatIsNotAnObjectIsNamed) {
  EXPECT_EQ(metrics_parse_error("[1, 2]\n"),
            "line 1 of metrics file 'm.jsonl' is not a JSON object: [1, 2]; fix: pass a file written by graphed "
            "train --metrics-file FILE (one JSON object per line)");
}

TEST(RunMetricsTest, RecordWithoutIterationIsNamed) {
  EXPECT_EQ(metrics_parse_error("{\"iteration\": 1, \"loss\": 2}\n{\"loss\": 1.5}\n"),
            "line 2 of metrics file 'm.jsonl' has no \"iteration\": {\"loss\": 1.5}; fix: every record needs "
            "\"iteration\" (graphed train --metrics-file writes it)");
}

TEST(RunMetricsTest, NonNumericValueIsNamed) {
  EXPECT_EQ(metrics_parse_error("{\"iteration\": 1, \"loss\": \"low\"}\n"),
            "line 1 of metrics file 'm.jsonl' has a non-numeric \"loss\": \"low\"; fix: pass a file written by "
            "graphed train --metrics-file FILE (one JSON object per line)");
  EXPECT_EQ(metrics_parse_error("{\"iteration\": null, \"loss\": 1}\n"),
            "line 1 of metrics file 'm.jsonl' has a non-numeric \"iteration\": null; fix: pass a file written by "
            "graphed train --metrics-file FILE (one JSON object per line)");
}

TEST(RunMetricsTest, TextWithoutRecordsIsRejected) {
  EXPECT_EQ(metrics_parse_error(" \n\n"),
            "metrics file 'm.jsonl' has no records; fix: pass a file written by graphed train --metrics-file FILE "
            "(it gets a record every --log-interval iterations)");
}

TEST(RunMetricsTest, MissingFileIsNamed) {
  EXPECT_EQ(error_text<DataError>([] { read_metrics_file("/nonexistent/m.jsonl", "m.jsonl"); }),
            "cannot read '/nonexistent/m.jsonl': no such file or directory; fix: check the path (graphed report "
            "takes metrics files, folders holding metrics.jsonl and bench JSON files)");
}

}  // namespace
}  // namespace graphed::report
