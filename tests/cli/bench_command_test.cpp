// tests/cli/bench_command_test.cpp — `graphed bench` on a machine that cannot run a GPU-only row marks
// it skipped with the reason and still times the rest.
#include "graphed/cli/bench_command.h"

#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "graph_support_for_test.h"
#include "graphed/util/build_info.h"
#include "graphed/util/error.h"

namespace graphed::cli {
namespace {

const std::vector<std::string> kSmallBench{
    "bench", "--device",     "cpu",       "--num-layers", "1",  "--hidden-size", "32", "--num-attention-heads",
    "2",     "--seq-length", "16",        "--vocab-size", "64", "--bench-iters", "2",  "--bench-warmup",
    "1",     "--impls",      "none,local"};

TEST(BenchCommandTest, GpuOnlyRowsAreSkippedWithTheReasonAndTheRestIsTimed) {
  std::ostringstream out;
  EXPECT_EQ(run_bench(parse_command_line(kSmallBench), out), 0);
  const std::string table = out.str();
  EXPECT_NE(table.find("| none | "), std::string::npos) << table;
  EXPECT_NE(table.find("| local | skipped: --cuda-graph-impl local needs CUDA graphs, but " +
                       graphed::testing::why_no_graphs_on_cpu()),
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
  EXPECT_EQ(rows[1]["skipped"], "--cuda-graph-impl local needs CUDA graphs, but " +
                                    graphed::testing::why_no_graphs_on_cpu() +
                                    "; fix: --cuda-graph-impl none, or run on a GPU machine");
  EXPECT_FALSE(rows[1].contains("ms_per_iter"));
}

TEST(BenchDecodeTest, RowsPerScopeAndBatchWithGraphScopesSkippedOnTheCpu) {
  std::ostringstream out;
  EXPECT_EQ(run_bench(parse_command_line({"bench", "--decode", "--preset", "tiny", "--device", "cpu", "--decode-scopes",
                                          "none,block", "--decode-batches", "1,3", "--decode-prompt-tokens", "4",
                                          "--decode-new-tokens", "6", "--json"}),
                      out),
            0);
  const auto rows = nlohmann::json::parse(out.str());
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0]["scope"], "none");
  EXPECT_EQ(rows[0]["batch"], 1);
  EXPECT_EQ(rows[1]["rows"], 3);  // the cache's rows are the largest batch, itself a bucket
  EXPECT_GT(rows[1]["ms_per_step"].get<double>(), 0.0);
  EXPECT_GT(rows[1]["tokens_per_s"].get<double>(), 0.0);
  EXPECT_EQ(rows[1]["roofline_share"], 0.0) << "no bandwidth is known for a CPU";
  EXPECT_EQ(rows[2]["scope"], "block");
  EXPECT_EQ(rows[2]["skipped"], "decode graphs cannot run: " + graphed::testing::why_no_graphs_on_cpu());
}

TEST(BenchDecodeTest, RefusesBadDecodeFlags) {
  EXPECT_THROW(parse_command_line({"bench", "--decode", "--decode-scopes", "nonee"}), ConfigError);
  EXPECT_THROW(parse_command_line({"bench", "--decode", "--decode-batches", "0"}), ConfigError);
  std::ostringstream out;
  EXPECT_THROW(run_bench(parse_command_line({"bench", "--decode", "--preset", "tiny", "--device", "cpu",
                                             "--decode-new-tokens", "100"}),
                         out),
               ConfigError);  // 32 + 100 > tiny's context of 64
}

TEST(BenchDecodeTest, RefusesFp8TrainingFlagsForDecodingAndPointsToQuantization) {
  std::ostringstream out;
  for (const char* mode : {"--decode", "--serve"}) {
    try {
      run_bench(parse_command_line({"bench", mode, "--preset", "tiny", "--device", "cpu", "--fp8-format", "hybrid"}),
                out);
      ADD_FAILURE() << mode << " with --fp8-format was not refused";
    } catch (const ConfigError& error) {
      EXPECT_EQ(std::string(error.what()), std::string("--fp8-format hybrid trains in FP8, but bench ") + mode +
                                               " decodes; fix: give --quantization fp8 for FP8 weights in decoding, "
                                               "and drop --fp8-format");
    }
  }
}

TEST(BenchDecodeTest, QuantizationIsForDecodingOnAGpuWithFp8TensorCores) {
  std::ostringstream out;
  const auto message = [&](std::vector<std::string> arguments) {
    try {
      run_bench(parse_command_line(arguments), out);
    } catch (const ConfigError& error) {
      return std::string(error.what());
    }
    return std::string("(not refused)");
  };
  EXPECT_EQ(message({"bench", "--preset", "tiny", "--device", "cpu", "--quantization", "fp8"}),
            "--quantization fp8 holds weights in FP8 for decoding, but bench times training here; fix: add --decode "
            "or --serve, or give --fp8-format hybrid to train in FP8");
  EXPECT_EQ(message({"bench", "--decode", "--preset", "tiny", "--device", "cpu", "--quantization", "int4"}),
            "--quantization int4 is not a quantization graphed knows; fix: give none (the default) or fp8 (linear "
            "weights in FP8 E4M3, a scale per output row)");
  // On this CPU the cast is refused, naming the device and the fix, before any weight is touched.
  const std::string cpu = message({"bench", "--decode", "--preset", "tiny", "--device", "cpu", "--quantization", "fp8",
                                   "--decode-new-tokens", "8"});
  EXPECT_EQ(cpu.rfind("--quantization fp8 needs a GPU with FP8 tensor cores, but ", 0), 0u) << cpu;
  EXPECT_NE(cpu.find("cpu"), std::string::npos) << cpu;
  EXPECT_NE(cpu.find("fix: run on an Ada, Hopper or Blackwell GPU, or drop --quantization"), std::string::npos) << cpu;
}

}  // namespace
}  // namespace graphed::cli
