// tests/dist/multi_process_test.cpp — `graphed train` launched as several processes on the CPU, the way
// torchrun launches it (WORLD_SIZE, RANK, LOCAL_RANK, MASTER_ADDR, MASTER_PORT; rank 0 hosts the
// store, Gloo): data parallelism trains as one process would, only rank 0 prints and writes, and a
// broken launch or configuration fails with one clear message.
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "child_processes.h"
#include "dist/rank_launch.h"
#include "graphed/util/file_system.h"
#include "graphed/util/safetensors.h"

namespace graphed {
namespace {

using testing::describe;
using testing::launch;
using testing::losses_of;
using testing::pick_port;
using testing::plus;
using testing::ProcessResult;
using testing::ProcessSpec;
using testing::rank_environment;
using testing::read_text;
using testing::run_processes;
using Clock = std::chrono::steady_clock;

int count(const std::string& text, const std::string& part) {
  int found = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) ++found;
  return found;
}

const std::vector<std::string> kTrain = {"train", "--preset",     "tiny", "--mock-data",     "--device",
                                         "cpu",   "--eval-iters", "0",    "--sample-tokens", "0"};
/// Relative paths: each process writes in its own folder, so what a rank wrote shows where.
const std::vector<std::string> kOutputs = {"--metrics-file", "metrics.jsonl", "--save", "checkpoints"};

/// Each test's processes work in a new temporary folder (tests/dist/rank_launch.h).
class MultiProcessTest : public testing::InTemporaryFolder<::testing::Test> {
 protected:
  MultiProcessTest() : InTemporaryFolder("graphed-multi-process") {}
};

TEST_F(MultiProcessTest, TwoDataParallelRanksTrainAsOneProcess) {
  const std::vector<std::string> arguments =
      plus(plus(kTrain, kOutputs),
           {"--train-iters", "30", "--global-batch-size", "8", "--micro-batch-size", "2", "--log-interval", "5"});
  // The reference and the two ranks at once: they share nothing but the machine.
  const int port = pick_port(0);
  const std::vector<ProcessResult> results =
      run_processes({{arguments, {}, {}, join_path(folder_, "one")},
                     {arguments, rank_environment(2, 0, port), {}, join_path(folder_, "rank0")},
                     {arguments, rank_environment(2, 1, port), {}, join_path(folder_, "rank1")}});
  for (const auto& result : results) ASSERT_EQ(result.exit_code, 0) << describe(results);

  // fp32 sums in another order: one process adds 4 microbatches' losses and gradients; each rank adds 2,
  // then the ranks' sums are averaged (all-reduce). The same numbers up to rounding: 1e-5 relative.
  const auto one = losses_of(join_path(folder_, "one/metrics.jsonl"));
  const auto two = losses_of(join_path(folder_, "rank0/metrics.jsonl"));
  ASSERT_EQ(one.size(), 6u) << describe(results);
  ASSERT_EQ(two.size(), one.size()) << describe(results);
  for (const auto& [iteration, loss] : one) {
    ASSERT_TRUE(two.count(iteration)) << "iteration " << iteration;
    EXPECT_NEAR(two.at(iteration), loss, 1e-5 * std::abs(loss)) << "iteration " << iteration;
  }

  // The same parameters after 30 AdamW steps, within 1e-5 (seen: below 1e-6). One exception: the key
  // bias (the middle third of qkv_bias: tiny has as many query groups as heads). Softmax ignores a shift
  // that is the same for every key, so its gradient is 0 in exact arithmetic and only rounding noise
  // (~1e-10) in fp32; Adam divides that by sqrt(v) + eps (1e-8) and moves the bias by up to lr x 1e-2
  // per step, in a direction the summation order decides. It stays within 1e-4 (seen: 1.3e-5).
  const auto reference = read_safetensors(join_path(folder_, "one/checkpoints/iter_0000030/model.safetensors"));
  const auto trained = read_safetensors(join_path(folder_, "rank0/checkpoints/iter_0000030/model.safetensors"));
  ASSERT_FALSE(reference.empty());
  ASSERT_EQ(trained.size(), reference.size());
  const auto max_difference = [](const at::Tensor& a, const at::Tensor& b) {
    return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
  };
  for (const auto& [name, tensor] : reference) {
    ASSERT_TRUE(trained.count(name)) << name;
    const at::Tensor other = trained.at(name);
    ASSERT_EQ(other.sizes(), tensor.sizes()) << name;
    const bool qkv_bias = name.size() >= 8 && name.compare(name.size() - 8, 8, "qkv_bias") == 0;
    if (!qkv_bias) {
      EXPECT_LE(max_difference(other, tensor), 1e-5) << name;
      continue;
    }
    const int64_t third = tensor.size(0) / 3;
    for (const int64_t part : {0, 2}) {  // query, value
      EXPECT_LE(max_difference(other.narrow(0, part * third, third), tensor.narrow(0, part * third, third)), 1e-5)
          << name << " part " << part;
    }
    EXPECT_LE(max_difference(other.narrow(0, third, third), tensor.narrow(0, third, third)), 1e-4) << name << " keys";
  }
}

// Two nodes of one rank each, on this machine: each rank is LOCAL_RANK 0 of LOCAL_WORLD_SIZE 1 (torchrun --nnodes 2
// --nproc-per-node 1 sets these, with GROUP_RANK the node); they train as one node of two ranks, bit for bit. What
// differs between one node and several in graphed is only which device a rank takes; NCCL over a network is not
// reachable here.
TEST_F(MultiProcessTest, TwoNodesOfOneRankTrainAsOneNodeOfTwo) {
  const std::vector<std::string> arguments =
      plus(kTrain, {"--train-iters", "6", "--global-batch-size", "8", "--micro-batch-size", "2", "--log-interval", "1",
                    "--metrics-file", "metrics.jsonl"});
  const int one_node = pick_port(21), two_nodes = pick_port(22);
  std::vector<testing::ProcessSpec> specs;
  for (int rank = 0; rank < 2; ++rank) {
    specs.push_back(
        {arguments, rank_environment(2, rank, one_node), {}, join_path(folder_, "node" + std::to_string(rank))});
    std::vector<std::string> node = rank_environment(2, rank, two_nodes);
    for (std::string& variable : node) {
      if (variable.rfind("LOCAL_RANK=", 0) == 0) variable = "LOCAL_RANK=0";
    }
    node.push_back("LOCAL_WORLD_SIZE=1");
    node.push_back("GROUP_RANK=" + std::to_string(rank));
    specs.push_back({arguments, node, {}, join_path(folder_, "nodes" + std::to_string(rank))});
  }
  const std::vector<ProcessResult> results = run_processes(specs);
  for (const auto& result : results) ASSERT_EQ(result.exit_code, 0) << describe(results);
  const auto one = losses_of(join_path(folder_, "node0/metrics.jsonl"));
  ASSERT_EQ(one.size(), 6u);
  EXPECT_EQ(losses_of(join_path(folder_, "nodes0/metrics.jsonl")), one);
}

TEST_F(MultiProcessTest, OnlyRankZeroPrintsAndWrites) {
  const std::vector<ProcessResult> results =
      launch(2, pick_port(1),
             plus(plus(kTrain, kOutputs),
                  {"--train-iters", "2", "--global-batch-size", "4", "--micro-batch-size", "2", "--log-interval", "1"}),
             folder_);
  ASSERT_EQ(results[0].exit_code, 0) << describe(results);
  ASSERT_EQ(results[1].exit_code, 0) << describe(results);
  EXPECT_NE(
      results[0].out.find("launch: 2 ranks (data-parallel 2 x pipeline 1 x tensor 1), Gloo; rank 0 prints and writes"),
      std::string::npos)
      << results[0].out;
  EXPECT_NE(results[0].out.find("done: 2 iterations"), std::string::npos) << results[0].out;
  EXPECT_EQ(results[1].out, "");
  EXPECT_EQ(losses_of(join_path(folder_, "rank0/metrics.jsonl")).size(), 2u);
  EXPECT_FALSE(path_exists(join_path(folder_, "rank1/metrics.jsonl")));
  EXPECT_TRUE(path_exists(join_path(folder_, "rank0/checkpoints/iter_0000002/model.safetensors")));
  EXPECT_FALSE(path_exists(join_path(folder_, "rank1/checkpoints")));
}

TEST_F(MultiProcessTest, CtrlCStopsEveryRankAtTheSameLogLineAndSaves) {
  // A terminal's Ctrl-C reaches every rank, each at its own moment: they agree at a log line, stop
  // together after the same iteration, rank 0 saves, and all exit 0.
  const int port = pick_port(6);
  std::vector<ProcessSpec> specs;
  const std::vector<std::string> arguments =
      plus(plus(kTrain, kOutputs),
           {"--train-iters", "100000", "--global-batch-size", "4", "--micro-batch-size", "2", "--log-interval", "3"});
  for (int rank = 0; rank < 2; ++rank) {
    specs.push_back(
        {arguments, rank_environment(2, rank, port), {}, join_path(folder_, "rank" + std::to_string(rank))});
  }
  bool signalled = false;
  const std::vector<ProcessResult> results = run_processes(
      specs, std::chrono::seconds(120), [&](const std::vector<pid_t>& pids, const std::vector<std::string>& out_paths) {
        if (signalled || read_text(out_paths[0]).find("iteration      3/100000") == std::string::npos) return;
        for (const pid_t pid : pids) ::kill(pid, SIGINT);
        signalled = true;
      });
  ASSERT_TRUE(signalled) << describe(results);
  ASSERT_EQ(results[0].exit_code, 0) << describe(results);
  ASSERT_EQ(results[1].exit_code, 0) << describe(results);
  const std::string& out = results[0].out;
  const std::size_t at = out.find("stopped by SIGINT after iteration ");
  ASSERT_NE(at, std::string::npos) << out;
  const int64_t iteration = std::stoll(out.substr(at + 34));
  EXPECT_EQ(iteration % 3, 0) << "the ranks agree at log lines: " << out;
  const std::string checkpoint =
      "checkpoints/iter_" + std::string(7 - std::to_string(iteration).size(), '0') + std::to_string(iteration);
  EXPECT_NE(out.find("stopped by SIGINT after iteration " + std::to_string(iteration) +
                     " of 100000; saved checkpoint " + checkpoint +
                     "; to go on: torchrun --nproc-per-node 2 --no-python graphed train --load checkpoints --save "
                     "checkpoints --metrics-file metrics.jsonl --device cpu\n"),
            std::string::npos)
      << out;
  EXPECT_TRUE(path_exists(join_path(folder_, "rank0/" + checkpoint + "/model.safetensors")));
  EXPECT_NE(results[0].err.find("stopping at the next log line (every 3 iterations, where the ranks agree), then "
                                "saving to checkpoints; press Ctrl-C again to exit at once"),
            std::string::npos)
      << results[0].err;
  EXPECT_EQ(results[1].err.find("stopping"), std::string::npos) << "rank 0 speaks for all: " << results[1].err;
}

TEST_F(MultiProcessTest, AMissingMasterAddressStopsEveryRankNamingIt) {
  const std::vector<ProcessResult> results =
      launch(2, pick_port(2), plus(kTrain, {"--train-iters", "2"}), folder_, {"MASTER_ADDR"});
  for (const auto& result : results) {
    EXPECT_EQ(result.exit_code, 1) << describe(results);
    EXPECT_EQ(result.err.rfind("error: WORLD_SIZE=2 asks for several processes, but MASTER_ADDR ", 0), 0u)
        << result.err;
    EXPECT_NE(result.err.find("; fix: "), std::string::npos) << result.err;
    EXPECT_EQ(result.out, "");
  }
}

TEST_F(MultiProcessTest, ARankThatFailsStopsTheOthersWithItsError) {
  // Rank 1 fails after the rendezvous (its data cannot be opened) while rank 0 trains: rank 0 must stop
  // at once, naming rank 1's error, instead of waiting in its first all-reduce for the timeout.
  const int port = pick_port(4);
  const std::vector<std::string> arguments = {"train",         "--preset", "tiny",         "--device", "cpu",
                                              "--train-iters", "5",        "--eval-iters", "0"};
  const auto started = Clock::now();
  const std::vector<ProcessResult> results =
      run_processes({{plus(arguments, {"--mock-data"}), rank_environment(2, 0, port), {}, join_path(folder_, "rank0")},
                     {plus(arguments, {"--data-path", "/nonexistent/tokens.bin"}),
                      rank_environment(2, 1, port),
                      {},
                      join_path(folder_, "rank1")}},
                    std::chrono::seconds(60));
  EXPECT_LT(Clock::now() - started, std::chrono::seconds(30)) << describe(results);
  EXPECT_EQ(results[0].exit_code, 1) << describe(results);
  EXPECT_EQ(results[1].exit_code, 1) << describe(results);
  const std::string why = "--data-path '/nonexistent/tokens.bin' does not exist; fix: ";
  EXPECT_EQ(results[1].err.rfind("error: rank 1: " + why, 0), 0u) << results[1].err;
  EXPECT_EQ(results[0].err.rfind("error: rank 0 is stopping because rank 1: " + why, 0), 0u) << results[0].err;
  EXPECT_EQ(count(results[0].err, "error: "), 1) << results[0].err;
}

TEST_F(MultiProcessTest, AConfigurationErrorIsPrintedOnceByRankZero) {
  const std::vector<ProcessResult> results =
      launch(2, pick_port(3), plus(kTrain, {"--pipeline-model-parallel-size", "2", "--num-layers", "3"}), folder_);
  EXPECT_EQ(results[0].exit_code, 1) << describe(results);
  EXPECT_EQ(results[1].exit_code, 1) << describe(results);
  EXPECT_EQ(count(results[0].err + results[1].err, "[PL-3]"), 1) << describe(results);
  EXPECT_EQ(count(results[0].err, "[PL-"), 1) << "PL-3 alone: " << results[0].err;
  EXPECT_NE(results[0].err.find("--num-layers 3 does not split evenly over --pipeline-model-parallel-size 2; fix: "),
            std::string::npos)
      << results[0].err;
  EXPECT_EQ(results[1].err, "");
  EXPECT_EQ(results[1].out, "");
}

TEST_F(MultiProcessTest, PipelineStagesTrainAsOneProcess) {
  // 4 layers over 2 stages: 1F1B, and interleaved with 2 virtual stages of 1 layer; 4 microbatches. Each
  // stage runs the same kernels on the same numbers; only the tied embedding's two gradient halves (summed
  // across the stages) and the norm's sum are added in another order: 1e-5 relative.
  const std::vector<std::string> arguments =
      plus(kTrain, {"--num-layers", "4", "--train-iters", "12", "--global-batch-size", "8", "--micro-batch-size", "2",
                    "--log-interval", "3", "--metrics-file", "metrics.jsonl", "--save", "checkpoints"});
  const std::vector<std::string> pipeline = {"--pipeline-model-parallel-size", "2"};
  const std::vector<std::string> interleaved = {"--pipeline-model-parallel-size", "2",
                                                "--num-layers-per-virtual-pipeline-stage", "1"};
  const int port = pick_port(5);
  const std::vector<ProcessResult> results =
      run_processes({{arguments, {}, {}, join_path(folder_, "one")},
                     {plus(arguments, pipeline), rank_environment(2, 0, port), {}, join_path(folder_, "a0")},
                     {plus(arguments, pipeline), rank_environment(2, 1, port), {}, join_path(folder_, "a1")},
                     {plus(arguments, interleaved), rank_environment(2, 0, port + 1), {}, join_path(folder_, "b0")},
                     {plus(arguments, interleaved), rank_environment(2, 1, port + 1), {}, join_path(folder_, "b1")}});
  for (const auto& result : results) ASSERT_EQ(result.exit_code, 0) << describe(results);
  const auto one = losses_of(join_path(folder_, "one/metrics.jsonl"));
  ASSERT_EQ(one.size(), 4u) << describe(results);
  for (const char* run : {"a0", "b0"}) {
    const auto staged = losses_of(join_path(folder_, std::string(run) + "/metrics.jsonl"));
    ASSERT_EQ(staged.size(), one.size()) << run << describe(results);
    for (const auto& [iteration, loss] : one) {
      EXPECT_NEAR(staged.at(iteration), loss, 1e-5 * std::abs(loss)) << run << " iteration " << iteration;
    }
  }
  EXPECT_NE(results[1].out.find("launch: 2 ranks (data-parallel 1 x pipeline 2 x tensor 1), Gloo"), std::string::npos)
      << results[1].out;
  // Rank 0 gathers every stage's parameters and optimizer state: the checkpoint is one process's, within
  // rounding (the key-bias slice aside, as in TwoDataParallelRanksTrainAsOneProcess: 1e-4).
  const std::string last = "checkpoints/iter_0000012/";
  const auto reference = read_safetensors(join_path(folder_, "one/" + last + "model.safetensors"));
  for (const char* run : {"a0", "b0"}) {
    const auto gathered = read_safetensors(join_path(folder_, std::string(run) + "/" + last + "model.safetensors"));
    ASSERT_EQ(gathered.size(), reference.size()) << run;
    for (const auto& [name, tensor] : reference) {
      ASSERT_TRUE(gathered.count(name)) << run << " " << name;
      const double difference = (gathered.at(name).to(at::kDouble) - tensor.to(at::kDouble)).abs().max().item<double>();
      EXPECT_LE(difference, name.find("qkv_bias") != std::string::npos ? 1e-4 : 1e-5) << run << " " << name;
    }
    const auto state = read_safetensors(join_path(folder_, std::string(run) + "/" + last + "optimizer.safetensors"));
    const auto one_state = read_safetensors(join_path(folder_, "one/" + last + "optimizer.safetensors"));
    EXPECT_EQ(state.size(), one_state.size()) << run;
    EXPECT_FALSE(path_exists(join_path(folder_, std::string(run == std::string("a0") ? "a1" : "b1") + "/checkpoints")));
  }
}

TEST_F(MultiProcessTest, AHybridModelTrainsOnStagesAndRanksAsOneProcess) {
  // A Mamba-hybrid model (M*M-) split into the stages M* and M-, and over two data-parallel ranks: the
  // losses of one process within rounding (1e-5 relative), as for the GPT model above.
  const std::vector<std::string> arguments = plus(kTrain, {"--num-layers",
                                                           "4",
                                                           "--hybrid-override-pattern",
                                                           "M*M-",
                                                           "--mamba-state-dim",
                                                           "16",
                                                           "--mamba-head-dim",
                                                           "32",
                                                           "--mamba-num-groups",
                                                           "2",
                                                           "--mamba-chunk-size",
                                                           "16",
                                                           "--train-iters",
                                                           "9",
                                                           "--global-batch-size",
                                                           "8",
                                                           "--micro-batch-size",
                                                           "2",
                                                           "--log-interval",
                                                           "3",
                                                           "--metrics-file",
                                                           "metrics.jsonl"});
  const std::vector<std::string> pipeline = {"--pipeline-model-parallel-size", "2"};
  const int port = pick_port(7);  // the stages first, then the ranks on the same port
  const std::vector<ProcessResult> staged =
      run_processes({{arguments, {}, {}, join_path(folder_, "one")},
                     {plus(arguments, pipeline), rank_environment(2, 0, port), {}, join_path(folder_, "p0")},
                     {plus(arguments, pipeline), rank_environment(2, 1, port), {}, join_path(folder_, "p1")}});
  for (const auto& result : staged) ASSERT_EQ(result.exit_code, 0) << describe(staged);
  const std::vector<ProcessResult> results =
      run_processes({{arguments, rank_environment(2, 0, port), {}, join_path(folder_, "d0")},
                     {arguments, rank_environment(2, 1, port), {}, join_path(folder_, "d1")}});
  for (const auto& result : results) ASSERT_EQ(result.exit_code, 0) << describe(results);
  const auto one = losses_of(join_path(folder_, "one/metrics.jsonl"));
  ASSERT_EQ(one.size(), 3u) << describe(results);
  for (const char* run : {"p0", "d0"}) {
    const auto split = losses_of(join_path(folder_, std::string(run) + "/metrics.jsonl"));
    ASSERT_EQ(split.size(), one.size()) << run << describe(results);
    for (const auto& [iteration, loss] : one) {
      EXPECT_NEAR(split.at(iteration), loss, 1e-5 * std::abs(loss)) << run << " iteration " << iteration;
    }
  }
}

TEST_F(MultiProcessTest, APipelineCheckpointResumesInOneProcessAndOnStages) {
  const std::string checkpoints = join_path(folder_, "checkpoints");
  const std::vector<std::string> arguments =
      plus(kTrain, {"--num-layers", "4", "--global-batch-size", "4", "--micro-batch-size", "2", "--log-interval", "2",
                    "--save", checkpoints});
  const std::vector<std::string> pipeline = {"--pipeline-model-parallel-size", "2"};
  const auto saved =
      launch(2, pick_port(0) + 3, plus(plus(arguments, pipeline), {"--train-iters", "4"}), join_path(folder_, "saved"));
  ASSERT_EQ(saved[0].exit_code, 0) << describe(saved);
  const auto one = run_processes(
      {{plus(arguments, {"--load", checkpoints, "--train-iters", "6"}), {}, {}, join_path(folder_, "one")}});
  ASSERT_EQ(one[0].exit_code, 0) << describe(one);
  EXPECT_NE(one[0].out.find("at iteration 4"), std::string::npos) << one[0].out;
  const auto staged =
      launch(2, pick_port(0) + 5, plus(plus(arguments, pipeline), {"--load", checkpoints, "--train-iters", "8"}),
             join_path(folder_, "staged"));
  ASSERT_EQ(staged[0].exit_code, 0) << describe(staged);
  ASSERT_EQ(staged[1].exit_code, 0) << describe(staged);
  EXPECT_NE(staged[0].out.find("at iteration 6"), std::string::npos) << staged[0].out;
  EXPECT_NE(staged[0].out.find("done: 2 iterations (7 to 8)"), std::string::npos) << staged[0].out;
}

TEST_F(MultiProcessTest, ACheckpointOfTwoRanksLoadsInOneProcessAndBack) {
  // Data-parallel ranks all hold the whole state, so a checkpoint of 2 ranks resumes in 1 process, and one
  // process's checkpoint resumes on 2 ranks (the layout is the launch's, not the checkpoint's).
  const std::string checkpoints = join_path(folder_, "checkpoints");
  const std::vector<std::string> arguments = plus(
      kTrain, {"--global-batch-size", "4", "--micro-batch-size", "2", "--log-interval", "2", "--save", checkpoints});
  const auto saved = launch(2, pick_port(6), plus(arguments, {"--train-iters", "4"}), join_path(folder_, "saved"));
  ASSERT_EQ(saved[0].exit_code, 0) << describe(saved);
  const auto one = run_processes(
      {{plus(arguments, {"--load", checkpoints, "--train-iters", "6"}), {}, {}, join_path(folder_, "one")}});
  ASSERT_EQ(one[0].exit_code, 0) << describe(one);
  EXPECT_NE(one[0].out.find("at iteration 4"), std::string::npos) << one[0].out;
  EXPECT_NE(one[0].out.find("done: 2 iterations (5 to 6)"), std::string::npos) << one[0].out;
  const auto again = launch(2, pick_port(7), plus(arguments, {"--load", checkpoints, "--train-iters", "8"}),
                            join_path(folder_, "again"));
  ASSERT_EQ(again[0].exit_code, 0) << describe(again);
  ASSERT_EQ(again[1].exit_code, 0) << describe(again);
  EXPECT_NE(again[0].out.find("at iteration 6"), std::string::npos) << again[0].out;
  EXPECT_NE(again[0].out.find("done: 2 iterations (7 to 8)"), std::string::npos) << again[0].out;
}

}  // namespace
}  // namespace graphed
