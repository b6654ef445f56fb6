// tests/report/bench_results_test.cpp — reading `graphed bench --json` and
// bench/reference_pytorch.py --json files, and every bad-input message.
#include "graphed/report/bench_results.h"

#include <gtest/gtest.h>

#include "report/report_fixtures.h"

#include "error_text.h"

namespace graphed::report {
namespace {

using testing::error_text;

using test_fixtures::kFixtures;

std::string parse_error(const std::string& text) {
  return error_text<DataError>([&] { parse_bench_json(text, "b.json", "b.json"); });
}

TEST(BenchResultsTest, ReadsGraphedBenchRows) {
  const BenchFile file = read_bench_file(kFixtures + "bench-tiny.json", "bench-tiny.json");
  EXPECT_EQ(file.name, "bench-tiny.json");
  ASSERT_EQ(file.rows.size(), 4u);
  EXPECT_EQ(file.preset(), "tiny");
  EXPECT_EQ(file.device(), "NVIDIA H200");
  const BenchRow& local = file.rows[1];
  EXPECT_EQ(local.impl, "local");
  EXPECT_FALSE(local.is_reference());
  EXPECT_EQ(local.ms_per_iter, 0.478);
  EXPECT_EQ(local.pipelined_ms_per_iter, 0.432);
  EXPECT_EQ(local.peak_mib, 139.8);
  EXPECT_EQ(local.reserved_mib, 162.0);
  EXPECT_EQ(local.graph_pool_mib, 60.0);
  EXPECT_EQ(local.graph_mib, 1.5);
  EXPECT_EQ(local.graphs, 12);
  EXPECT_EQ(local.loss, 7.0095);
}

TEST(BenchResultsTest, ReadsPyTorchReferenceRows) {
  const BenchFile file = read_bench_file(kFixtures + "reference-tiny.json", "reference-tiny.json");
  ASSERT_EQ(file.rows.size(), 2u);
  EXPECT_EQ(file.rows[0].impl, "pytorch eager");
  EXPECT_TRUE(file.rows[0].is_reference());
  EXPECT_EQ(file.rows[0].ms_per_iter, 5.768);
  EXPECT_EQ(file.rows[0].reserved_mib, 76.0);
  EXPECT_FALSE(file.rows[0].graph_pool_mib.has_value());  // the reference has no graph pool column
  EXPECT_FALSE(file.rows[0].graphs.has_value());
}

TEST(BenchResultsTest, OnlyImplAndMsPerIterAreRequired) {
  const BenchFile file = parse_bench_json("[{\"impl\": \"none\", \"ms_per_iter\": 2.5}]", "b.json", "b.json");
  ASSERT_EQ(file.rows.size(), 1u);
  EXPECT_EQ(file.rows[0].ms_per_iter, 2.5);
  EXPECT_FALSE(file.rows[0].pipelined_ms_per_iter.has_value());
  EXPECT_EQ(file.preset(), "");
}

TEST(BenchResultsTest, SkippedRowsAreKeptApartWithTheirReason) {
  const BenchFile file = parse_bench_json(
      "[{\"impl\": \"none\", \"ms_per_iter\": 2.5}, {\"impl\": \"local\", \"skipped\": \"needs a CUDA device\"}]",
      "b.json", "b.json");
  ASSERT_EQ(file.rows.size(), 1u);
  ASSERT_EQ(file.skipped.size(), 1u);
  EXPECT_EQ(file.skipped[0].impl, "local");
  EXPECT_EQ(file.skipped[0].reason, "needs a CUDA device");
  EXPECT_EQ(parse_error("[{\"impl\": \"local\", \"skipped\": \"needs a CUDA device\"}]"),
            "bench file 'b.json' has no timed rows (every row was skipped); fix: pass the output of graphed bench "
            "--json or bench/reference_pytorch.py --json (a JSON array of rows)");
}

TEST(BenchResultsTest, TextThatIsNotJsonNamesTheLine) {
  EXPECT_EQ(parse_error("[\n  {\"impl\": \"none\",\n   \"ms_per_iter\": 2.5,,\n]"),
            "bench file 'b.json' is not JSON (line 3); fix: pass the output of graphed bench --json or "
            "bench/reference_pytorch.py --json (a JSON array of rows)");
}

TEST(BenchResultsTest, NotAnArrayIsRejected) {
  EXPECT_EQ(parse_error("{\"impl\": \"none\"}"),
            "bench file 'b.json' is not a JSON array of rows; fix: pass the output of graphed bench --json or "
            "bench/reference_pytorch.py --json (a JSON array of rows)");
}

TEST(BenchResultsTest, EmptyArrayIsRejected) {
  EXPECT_EQ(parse_error("[]"),
            "bench file 'b.json' has no rows; fix: pass the output of graphed bench --json or "
            "bench/reference_pytorch.py --json (a JSON array of rows)");
}

TEST(BenchResultsTest, RowProblemsAreNamed) {
  const std::string fix =
      "; fix: pass the output of graphed bench --json or bench/reference_pytorch.py --json (a JSON array of rows)";
  EXPECT_EQ(parse_error("[{\"impl\": \"none\", \"ms_per_iter\": 1}, {\"ms_per_iter\": 1}]"),
            "row 2 of bench file 'b.json' has no \"impl\" name" + fix);
  EXPECT_EQ(parse_error("[{\"impl\": \"local\"}]"),
            "row 1 of bench file 'b.json' (local) has no \"ms_per_iter\"" + fix);
  EXPECT_EQ(parse_error("[{\"impl\": \"local\", \"ms_per_iter\": \"fast\"}]"),
            "row 1 of bench file 'b.json' has a non-numeric \"ms_per_iter\": \"fast\"" + fix);
  EXPECT_EQ(parse_error("[3]"), "row 1 of bench file 'b.json' is not a JSON object: 3" + fix);
}

}  // namespace
}  // namespace graphed::report
