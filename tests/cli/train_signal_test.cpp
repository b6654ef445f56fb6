// tests/cli/train_signal_test.cpp — Ctrl-C (SIGINT) and SIGTERM sent to a real `graphed train`
// process: with --save it finishes the iteration, saves, says what was saved and how to go on, and
// exits 0, and --load then goes on from there; without --save it stops the same way and says that
// nothing was saved (--exit-signal-handler); --no-exit-signal-handler dies at once, as before.
#include <csignal>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "child_processes.h"
#include "graphed/util/file_system.h"

namespace graphed {
namespace {

using testing::ProcessResult;
using testing::read_text;
using testing::run_processes;

class TrainSignalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(folder_.empty()) << "cannot create a temporary folder";
    std::ofstream(join_path(folder_, "text.txt"))
        << std::string(4000, 'a') + "The quick brown fox jumps over the dog. ";
  }
  void TearDown() override {
    if (!HasFailure()) remove_all(folder_);
  }

  /// graphed train on the CPU in folder_, with the flags; `signal` is sent once the first log line is out.
  ProcessResult train_until_signal(const std::vector<std::string>& flags, int signal,
                                   const std::string& iterations = "1000000") {
    std::vector<std::string> arguments{"train", "--data-path",           "text.txt", "--device",
                                       "cpu",   "--num-layers",          "1",        "--hidden-size",
                                       "32",    "--num-attention-heads", "2",        "--seq-length",
                                       "16",    "--train-iters",         iterations, "--log-interval",
                                       "1",     "--eval-iters",          "0",        "--sample-tokens",
                                       "0"};
    arguments.insert(arguments.end(), flags.begin(), flags.end());
    bool sent = false;
    const auto results =
        run_processes({{arguments, {}, {}, folder_}}, std::chrono::seconds(120),
                      [&](const std::vector<pid_t>& pids, const std::vector<std::string>& out_paths) {
                        if (sent || read_text(out_paths[0]).find(" 1/" + iterations + " ") == std::string::npos) return;
                        ::kill(pids[0], signal);
                        sent = true;
                      });
    EXPECT_TRUE(sent) << results[0].out << results[0].err;
    return results[0];
  }

  /// The iteration a "stopped by ... after iteration N of" line names.
  static int64_t stopped_at(const std::string& out) {
    const std::string marker = " after iteration ";
    const std::size_t at = out.find("stopped by ");
    if (at == std::string::npos) return -1;
    return std::stoll(out.substr(out.find(marker, at) + marker.size()));
  }

  static std::string iteration_folder(int64_t iteration) {
    const std::string digits = std::to_string(iteration);
    return "iter_" + std::string(7 - digits.size(), '0') + digits;
  }

  std::string folder_ = make_temporary_directory("graphed-train-signal");
};

TEST_F(TrainSignalTest, CtrlCWithSaveFinishesTheIterationSavesAndSaysHowToGoOn) {
  const ProcessResult result = train_until_signal({"--save", "run"}, SIGINT);
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  const int64_t iteration = stopped_at(result.out);
  ASSERT_GE(iteration, 1) << result.out;
  const std::string checkpoint = "run/" + iteration_folder(iteration);
  EXPECT_NE(result.out.find("saved checkpoint " + checkpoint + "\nstopped by SIGINT after iteration " +
                            std::to_string(iteration) + " of 1000000; saved checkpoint " + checkpoint +
                            "; to go on: graphed train --load run --save run --device cpu\ndone: " +
                            std::to_string(iteration) + " iterations in "),
            std::string::npos)
      << result.out;
  EXPECT_NE(
      result.err.find("\nstopping after this iteration, then saving to run; press Ctrl-C again to exit at once\n"),
      std::string::npos)
      << result.err;
  EXPECT_TRUE(path_exists(join_path(folder_, checkpoint + "/model.safetensors")));

  // --load goes on from there (the checkpoint's settings, --train-iters lowered to end soon).
  const auto resumed =
      run_processes({{{"train", "--load", "run", "--device", "cpu", "--train-iters", std::to_string(iteration + 2)},
                      {},
                      {},
                      folder_}});
  ASSERT_EQ(resumed[0].exit_code, 0) << resumed[0].out << resumed[0].err;
  EXPECT_NE(resumed[0].out.find("resumed from run at iteration " + std::to_string(iteration) + "\n"), std::string::npos)
      << resumed[0].out;
  EXPECT_NE(resumed[0].out.find("done: 2 iterations (" + std::to_string(iteration + 1) + " to " +
                                std::to_string(iteration + 2) + ") in "),
            std::string::npos)
      << resumed[0].out;
}

/// The printed command, run as printed, goes on as the stopped run would have: it saves into the same folder
/// (at the same interval and at the end) and appends to the same metrics file, also where a --config file gave
/// those in its dash spelling.
TEST_F(TrainSignalTest, ThePrintedCommandGoesOnSavingAndLogging) {
  std::ofstream(join_path(folder_, "run.json")) << R"({"save-interval": 1000, "metrics-file": "logs/metrics.jsonl"})";
  const ProcessResult result = train_until_signal({"--save", "run", "--config", "run.json"}, SIGINT, "3000");
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  const std::string marker = "; to go on: graphed ";
  const std::size_t at = result.out.find(marker);
  ASSERT_NE(at, std::string::npos) << result.out;
  const std::string command = result.out.substr(at + marker.size(), result.out.find('\n', at) - at - marker.size());
  EXPECT_EQ(command, "train --load run --save run --save-interval 1000 --metrics-file logs/metrics.jsonl --device cpu");
  std::vector<std::string> arguments;
  for (std::size_t start = 0; start <= command.size();) {
    const std::size_t space = std::min(command.find(' ', start), command.size());
    arguments.push_back(command.substr(start, space - start));
    start = space + 1;
  }
  const auto resumed = run_processes({{arguments, {}, {}, folder_}}, std::chrono::seconds(120));
  ASSERT_EQ(resumed[0].exit_code, 0) << resumed[0].out << resumed[0].err;
  for (const int64_t iteration : {2000, 3000}) {
    EXPECT_TRUE(path_exists(join_path(folder_, "run/" + iteration_folder(iteration) + "/model.safetensors")))
        << iteration;
  }
  EXPECT_EQ(read_text(join_path(folder_, "run/latest_checkpointed_iteration.txt")), "3000\n");
  const std::string metrics = read_text(join_path(folder_, "logs/metrics.jsonl"));
  EXPECT_NE(metrics.find("\"iteration\":1,"), std::string::npos) << metrics.substr(0, 300);
  EXPECT_NE(metrics.find("\"iteration\":3000,"), std::string::npos) << metrics.substr(metrics.size() - 300);
}

TEST_F(TrainSignalTest, SigtermWithTheHandlerAndNoSaveStopsAndSaysNothingWasSaved) {
  const ProcessResult result = train_until_signal({"--exit-signal-handler"}, SIGTERM);
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  const int64_t iteration = stopped_at(result.out);
  EXPECT_NE(result.out.find("stopped by SIGTERM after iteration " + std::to_string(iteration) +
                            " of 1000000; nothing was saved (no --save)\n"),
            std::string::npos)
      << result.out;
  EXPECT_NE(
      result.err.find("stopping after this iteration, without saving (no --save); press Ctrl-C again to exit at once"),
      std::string::npos)
      << result.err;
}

TEST_F(TrainSignalTest, WithoutTheHandlerASignalEndsTheRunAtOnce) {
  const ProcessResult result = train_until_signal({"--save", "run", "--no-exit-signal-handler"}, SIGINT);
  EXPECT_EQ(result.exit_code, -1) << result.out << result.err;
  EXPECT_EQ(result.signal, SIGINT);
  EXPECT_EQ(result.out.find("stopped by"), std::string::npos) << result.out;
}

}  // namespace
}  // namespace graphed
