// tests/cli/bench_command_test.cpp — `graphed bench` on a machine that cannot run a GPU-only row marks
// it skipped with the reason and still times the rest.
#include "graphed/cli/bench_command.h"

#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "graphed/util/build_info.h"

namespace graphed::cli {
namespace {

const std::vector<std::string> kSmallBench{"bench", "--device", "cpu", "--num-layers", "1", "--hidden-size", "32",
                                           "--num-attention-heads", "2", "--seq-length", "16", "--vocab-size", "64",
                                           "--bench-iters", "2", "--bench-warmup", "1", "--impls", "none,local"};

std::string why_not_here() {
  return built_with_cuda() ? "no CUDA device is visible"
                           : "this binary was built against a CPU-only LibTorch: GRAPHED_CUDA=0";
}

TEST(BenchCommandTest, GpuOnlyRowsAreSkippedWithTheReasonAndTheRestIsTimed) {
  std::ostringstream out;
  EXPECT_EQ(run_bench(parse_command_line(kSmallBench), out), 0);
  const std::string table = out.str();
  EXPECT_NE(table.find("| none | "), std::string::npos) << table;
  EXPECT_NE(table.find("| local | skipped: --cuda-graph-impl local needs a CUDA device, but this run is on the CPU"),
            std::string::npos)
      << table;
}

TEST(BenchCommandTest, SkippedRowsInJsonCarryTheReasonInsteadOfNumbers) {
  std::vector<std::string> arguments = kSmallBench;
  arguments.push_back("--json");
  std::ostringstream out;
  run_bench(parse_command_line(arguments), out);
  const nlohmann::json rows = nlohmann::json::parse(out.str());
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_TRUE(rows[0].contains("ms_per_iter"));
  EXPECT_EQ(rows[1]["skipped"], "--cuda-graph-impl local needs a CUDA device, but this run is on the CPU (" +
                                    why_not_here() +
                                    "); fix: --cuda-graph-impl none, or run on a GPU machine");
  EXPECT_FALSE(rows[1].contains("ms_per_iter"));
}

}  // namespace
}  // namespace graphed::cli
