// tests/cli/train_command_test.cpp — `graphed train` end to end on a few CPU iterations, and the
// impls it refuses, with their messages.
#include "graphed/cli/train_command.h"

#include <sstream>

#include <gtest/gtest.h>

#include "graphed/util/build_info.h"
#include "graphed/util/error.h"

namespace graphed::cli {
namespace {

std::string train_error(std::vector<std::string> arguments) {
  arguments.insert(arguments.begin(), "train");
  std::ostringstream out;
  try {
    run_train(parse_command_line(arguments), out);
  } catch (const Error& error) {
    return error.what();
  }
  return "(no error)";
}

TEST(TrainCommandTest, TrainsAFewIterationsOnMockData) {
  std::ostringstream out;
  const int code = run_train(parse_command_line({"train", "--mock-data", "--train-iters", "4", "--log-interval", "2",
                                                 "--eval-iters", "1", "--eval-interval", "4", "--device", "cpu"}),
                             out);
  EXPECT_EQ(code, 0);
  EXPECT_NE(out.str().find("data: mock data"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("iteration      4/4"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("done: 4 iterations"), std::string::npos) << out.str();
}

TEST(TrainCommandTest, FullIterationNeedsACudaDevice) {
  const std::string why = built_with_cuda() ? "no CUDA device is visible" : "this binary was built against a CPU-only LibTorch: GRAPHED_CUDA=0";
  EXPECT_EQ(train_error({"--mock-data", "--cuda-graph-impl", "full_iteration", "--device", "cpu"}),
            "--cuda-graph-impl full_iteration needs a CUDA device, but this run is on the CPU (" +
                (built_with_cuda() ? std::string("no CUDA device is visible") : why) +
                "); fix: --cuda-graph-impl none, or run on a GPU machine");
}

TEST(TrainCommandTest, TransformerEngineNeedsACudaDevice) {
  const std::string why = built_with_cuda() ? "no CUDA device is visible" : "this binary was built against a CPU-only LibTorch: GRAPHED_CUDA=0";
  EXPECT_EQ(train_error({"--mock-data", "--cuda-graph-impl", "transformer_engine", "--device", "cpu"}),
            "--cuda-graph-impl transformer_engine needs a CUDA device, but this run is on the CPU (" + why +
                "); fix: --cuda-graph-impl none, or run on a GPU machine");
}

TEST(TrainCommandTest, LocalNeedsACudaDevice) {
  const std::string why = built_with_cuda() ? "no CUDA device is visible" : "this binary was built against a CPU-only LibTorch: GRAPHED_CUDA=0";
  EXPECT_EQ(train_error({"--mock-data", "--cuda-graph-impl", "local", "--device", "cpu"}),
            "--cuda-graph-impl local needs a CUDA device, but this run is on the CPU (" + why +
                "); fix: --cuda-graph-impl none, or run on a GPU machine");
  // The legacy flag migrates to the same impl, and so to the same message.
  EXPECT_EQ(train_error({"--mock-data", "--enable-cuda-graph", "--device", "cpu"}),
            "--cuda-graph-impl local needs a CUDA device, but this run is on the CPU (" + why +
                "); fix: --cuda-graph-impl none, or run on a GPU machine");
}

TEST(TrainCommandTest, InvalidConfigurationListsEveryError) {
  std::vector<std::string> arguments{"train", "--num-layers", "0", "--cuda-graph-warmup-steps", "0"};
  try {
    std::ostringstream out;
    run_train(parse_command_line(arguments), out);
    FAIL() << "no error";
  } catch (const ConfigError& error) {
    EXPECT_STREQ(error.what(), "invalid configuration (2 errors)");
    ASSERT_EQ(error.details().size(), 2u);
  }
}

}  // namespace
}  // namespace graphed::cli
