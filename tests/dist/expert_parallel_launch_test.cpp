// tests/dist/expert_parallel_launch_test.cpp — `graphed train --expert-model-parallel-size 2` as ranks on the CPU
// (Gloo, tests/dist/rank_launch.h) with moe-small's MoE on tiny, drop-and-pad and grouped dropless: two ranks
// (expert 2 x expert-data 1) and four (expert 2 x expert-data 2, whose experts' gradients are summed over the
// ranks holding the same experts) follow one process over 20 iterations, and the checkpoint rank 0 saves is one
// process's (every expert); a checkpoint crosses layouts both ways (EP=2 resumes one process's, one process
// EP=2's).
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "dist/expert_test_support.h"
#include "dist/rank_launch.h"
#include "graphed/util/file_system.h"

namespace graphed {
namespace expert_parallel_test {  // named: the tests build as one unity source
namespace {

using testing::describe;
using testing::expect_losses_near;
using testing::launch;
using testing::losses_of;
using testing::moe_flags;
using testing::pick_port;
using testing::plus;
using testing::ProcessResult;
using testing::run_processes;

struct DispatchCase {
  const char* name;
  std::vector<std::string> flags;
};

const std::vector<DispatchCase>& dispatch_cases() {
  static const std::vector<DispatchCase> cases = {
      {"drop_and_pad", moe_flags({"--moe-expert-capacity-factor", "1.0", "--moe-pad-expert-input-to-capacity"})},
      {"grouped_dropless", moe_flags({"--moe-grouped-gemm"})}};
  return cases;
}

const std::vector<std::string> kExperts = {"--expert-model-parallel-size", "2"};

class ExpertParallelLaunchTest : public testing::InTemporaryFolder<::testing::TestWithParam<DispatchCase>> {
 protected:
  ExpertParallelLaunchTest() : InTemporaryFolder("graphed-expert-parallel") {}
};

// Drop-and-pad matches too: each rank's microbatch holds the samples of one of one process's microbatches, so the
// capacity and the drops (from a microbatch's own tokens) are the same.
TEST_P(ExpertParallelLaunchTest, TwoExpertRanksTrainAsOneProcessAndSaveEveryExpert) {
  const std::vector<std::string> arguments =
      plus(plus(testing::kTinyCpuTrain, GetParam().flags), {"--train-iters", "20", "--save", "checkpoints"});
  const int port = pick_port(12);
  const std::vector<ProcessResult> results = run_processes(
      {{arguments, {}, {}, join_path(folder_, "one")},
       {plus(arguments, kExperts), testing::rank_environment(2, 0, port), {}, join_path(folder_, "rank0")},
       {plus(arguments, kExperts), testing::rank_environment(2, 1, port), {}, join_path(folder_, "rank1")}});
  for (const auto& result : results) ASSERT_EQ(result.exit_code, 0) << describe(results);
  EXPECT_NE(results[1].out.find("(data-parallel 2 x pipeline 1 x tensor 1; expert 2 x expert-data 1)"),
            std::string::npos)
      << results[1].out;
  expect_losses_near(losses_of(join_path(folder_, "rank0/metrics.jsonl")),
                     losses_of(join_path(folder_, "one/metrics.jsonl")), 20, 1e-5, GetParam().name);
  // Every expert, under one process's names and shapes: the same values up to 20 AdamW steps of rounding.
  testing::expect_checkpoint_near(join_path(folder_, "one/checkpoints/iter_0000020/model.safetensors"),
                                  join_path(folder_, "rank0/checkpoints/iter_0000020/model.safetensors"), 1e-4,
                                  GetParam().name);
  EXPECT_FALSE(path_exists(join_path(folder_, "rank1/checkpoints")));
}

TEST_P(ExpertParallelLaunchTest, ACheckpointCrossesLayoutsBothWays) {
  testing::expect_checkpoint_crosses_layouts(
      plus(plus(testing::kTinyCpuTrain, GetParam().flags), {"--lr-decay-iters", "20"}), kExperts, folder_,
      pick_port(13), pick_port(14), "expert ranks");
}

INSTANTIATE_TEST_SUITE_P(Dispatch, ExpertParallelLaunchTest, ::testing::ValuesIn(dispatch_cases()),
                         [](const ::testing::TestParamInfo<DispatchCase>& info) { return info.param.name; });

// Four ranks, expert 2 x expert-data 2: ranks 0 and 2 hold experts 0-1, ranks 1 and 3 experts 2-3, and each pair
// sums its experts' gradients (divided by the data-parallel size 4). Microbatches of 2, so each rank's one
// microbatch is one of one process's four. Without clipping: the gradient norm that clips is summed in float32 in
// another order (the dense part, then every rank's experts), 1e-5 of it apart (seen), and Adam makes the clipped
// updates' difference up to 6e-4 in a weight after 20 steps (seen); unclipped, the losses agree within 1e-7 (seen).
TEST(ExpertDataParallelLaunchTest, FourRanksWithTwoExpertGroupsTrainAsOneProcess) {
  const std::string folder = make_temporary_directory("graphed-expert-data-parallel");
  ASSERT_FALSE(folder.empty());
  const std::vector<std::string> arguments =
      plus(plus(testing::kTinyCpuTrain, moe_flags({"--moe-grouped-gemm"})),
           {"--train-iters", "20", "--micro-batch-size", "2", "--clip-grad", "0", "--save", "checkpoints"});
  const auto one = run_processes({{arguments, {}, {}, join_path(folder, "one")}});
  ASSERT_EQ(one[0].exit_code, 0) << describe(one);
  const auto ranks = launch(4, pick_port(15), plus(arguments, kExperts), folder);
  for (const auto& result : ranks) ASSERT_EQ(result.exit_code, 0) << describe(ranks);
  EXPECT_NE(ranks[0].out.find("expert 2 x expert-data 2"), std::string::npos) << ranks[0].out;
  expect_losses_near(losses_of(join_path(folder, "rank0/metrics.jsonl")),
                     losses_of(join_path(folder, "one/metrics.jsonl")), 20, 1e-5, "expert 2 x expert-data 2");
  testing::expect_checkpoint_near(join_path(folder, "one/checkpoints/iter_0000020/model.safetensors"),
                                  join_path(folder, "rank0/checkpoints/iter_0000020/model.safetensors"), 1e-4,
                                  "expert 2 x expert-data 2");
  if (!::testing::Test::HasFailure()) remove_all(folder);
}

// Pipeline 2 x expert 2 (data-parallel 2) on four ranks: each stage's MoE layers exchange tokens within the stage,
// the stages' states are gathered to the first stage of each expert rank and joined there, so rank 0 writes one
// process's checkpoint; both dispatch modes, and the checkpoint resumed by one process.
TEST(ExpertPipelineLaunchTest, PipelineStagesWithExpertRanksTrainAsOneProcess) {
  const std::string folder = make_temporary_directory("graphed-expert-pipeline");
  ASSERT_FALSE(folder.empty());
  int port = 4;
  for (const DispatchCase& dispatch : dispatch_cases()) {
    const std::string name = dispatch.name;
    const std::vector<std::string> arguments =
        plus(plus(testing::kTinyCpuTrain, dispatch.flags), {"--train-iters", "10", "--save", "checkpoints"});
    const auto one = run_processes({{arguments, {}, {}, join_path(folder, name + "-one")}});
    ASSERT_EQ(one[0].exit_code, 0) << describe(one);
    const auto ranks =
        launch(4, pick_port(port++), plus(arguments, plus(kExperts, {"--pipeline-model-parallel-size", "2"})),
               join_path(folder, name));
    for (const auto& result : ranks) ASSERT_EQ(result.exit_code, 0) << describe(ranks);
    EXPECT_NE(ranks[0].out.find("(data-parallel 2 x pipeline 2 x tensor 1; expert 2 x expert-data 1)"),
              std::string::npos)
        << ranks[0].out;
    expect_losses_near(losses_of(join_path(folder, name + "/rank0/metrics.jsonl")),
                       losses_of(join_path(folder, name + "-one/metrics.jsonl")), 10, 1e-5, name);
    testing::expect_checkpoint_near(join_path(folder, name + "-one/checkpoints/iter_0000010/model.safetensors"),
                                    join_path(folder, name + "/rank0/checkpoints/iter_0000010/model.safetensors"), 1e-4,
                                    name);
  }
  if (!::testing::Test::HasFailure()) remove_all(folder);
}

// Evaluation and samples under expert parallelism: every rank of the first expert group draws the sample with rank 0
// (the MoE layers exchange tokens), and with fixed blocks both run dropless and leave no overflow behind. On a small
// byte-level corpus of its own (samples need byte-level text).
TEST(ExpertEvaluationLaunchTest, EvaluationAndSamplesRunOnEveryExpertRank) {
  const std::string folder = make_temporary_directory("graphed-expert-evaluation");
  ASSERT_FALSE(folder.empty());
  std::string text;
  for (int i = 0; i < 4000; ++i) text += i % 7 == 0 ? "experts route tokens. " : "the ranks exchange them ";
  ASSERT_EQ(write_file_atomically(join_path(folder, "corpus.txt"), text), 0);
  const std::vector<std::string> arguments = {"train",
                                              "--preset",
                                              "tiny",
                                              "--data-path",
                                              join_path(folder, "corpus.txt"),
                                              "--device",
                                              "cpu",
                                              "--train-iters",
                                              "4",
                                              "--eval-interval",
                                              "2",
                                              "--eval-iters",
                                              "2",
                                              "--sample-tokens",
                                              "8",
                                              "--global-batch-size",
                                              "8",
                                              "--micro-batch-size",
                                              "4",
                                              "--log-interval",
                                              "1"};
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"drop_and_pad", moe_flags({"--moe-expert-capacity-factor", "1.0", "--moe-pad-expert-input-to-capacity"})},
      {"blocks", moe_flags({"--moe-grouped-gemm", "--moe-expert-rank-capacity-factor", "0.5"})}};
  int port = 6;
  for (const auto& [name, flags] : cases) {
    const auto ranks = launch(2, pick_port(port++), plus(plus(arguments, flags), kExperts), join_path(folder, name));
    for (const auto& result : ranks) ASSERT_EQ(result.exit_code, 0) << name << "\n" << describe(ranks);
    EXPECT_NE(ranks[0].out.find("validation loss at iteration 4"), std::string::npos) << name << ranks[0].out;
    EXPECT_NE(ranks[0].out.find("sample at iteration 4"), std::string::npos) << name << ranks[0].out;
  }
  if (!::testing::Test::HasFailure()) remove_all(folder);
}

// Megatron's default dispatcher, allgather, under expert parallelism: graphed exchanges all-to-all anyway (note
// PL-18), so the run is the alltoall run's, bit for bit.
TEST(ExpertDispatcherLaunchTest, TheAllgatherDispatcherTrainsAsTheAlltoallOne) {
  const std::string folder = make_temporary_directory("graphed-expert-allgather");
  ASSERT_FALSE(folder.empty());
  const std::vector<std::string> moe = {"--num-experts",         "4",   "--moe-router-topk",    "2",
                                        "--moe-ffn-hidden-size", "256", "--moe-aux-loss-coeff", "0.01",
                                        "--moe-grouped-gemm"};
  const std::vector<std::string> arguments =
      plus(plus(plus(testing::kTinyCpuTrain, moe), kExperts), {"--train-iters", "6"});
  const auto allgather = launch(2, pick_port(9), arguments, join_path(folder, "allgather"));
  for (const auto& result : allgather) ASSERT_EQ(result.exit_code, 0) << describe(allgather);
  const auto alltoall = launch(2, pick_port(10), plus(arguments, {"--moe-token-dispatcher-type", "alltoall"}),
                               join_path(folder, "alltoall"));
  for (const auto& result : alltoall) ASSERT_EQ(result.exit_code, 0) << describe(alltoall);
  EXPECT_NE((allgather[0].out + allgather[0].err).find("[PL-18]"), std::string::npos) << allgather[0].out;
  const auto losses = losses_of(join_path(folder, "allgather/rank0/metrics.jsonl"));
  EXPECT_EQ(losses.size(), 6u);
  EXPECT_EQ(losses, losses_of(join_path(folder, "alltoall/rank0/metrics.jsonl")));
  if (!::testing::Test::HasFailure()) remove_all(folder);
}

/// The "moe_overflow_reruns" of a --metrics-file's last record.
int64_t reruns_of(const std::string& metrics_file) {
  int64_t reruns = -1;
  std::istringstream lines(testing::read_text(metrics_file));
  for (std::string line; std::getline(lines, line);) {
    const auto record = nlohmann::json::parse(line);
    if (record.contains("moe_overflow_reruns")) reruns = record.at("moe_overflow_reruns").get<int64_t>();
  }
  return reruns;
}

// --moe-expert-rank-capacity-factor: with 0.25 every iteration overflows a block (a rank's even share is 4 times a
// block) and runs again dropless, so the losses are those of the dropless all-to-all, bit for bit; with 2 (= the
// ranks) no block can overflow, and the static blocks follow the dropless run within rounding. Then the same with the
// paged stash.
TEST(ExpertOverflowLaunchTest, OverflowedIterationsRunAgainDroplessAndAreCounted) {
  const std::string folder = make_temporary_directory("graphed-expert-overflow");
  ASSERT_FALSE(folder.empty());
  const std::vector<std::string> arguments =
      plus(plus(plus(testing::kTinyCpuTrain, moe_flags({"--moe-grouped-gemm"})), kExperts), {"--train-iters", "10"});
  const auto dropless = launch(2, pick_port(1), arguments, join_path(folder, "dropless"));
  for (const auto& result : dropless) ASSERT_EQ(result.exit_code, 0) << describe(dropless);
  const auto overflowing = launch(2, pick_port(2), plus(arguments, {"--moe-expert-rank-capacity-factor", "0.25"}),
                                  join_path(folder, "overflowing"));
  for (const auto& result : overflowing) ASSERT_EQ(result.exit_code, 0) << describe(overflowing);
  const auto roomy =
      launch(2, pick_port(3), plus(arguments, {"--moe-expert-rank-capacity-factor", "2"}), join_path(folder, "roomy"));
  for (const auto& result : roomy) ASSERT_EQ(result.exit_code, 0) << describe(roomy);

  const auto reference = losses_of(join_path(folder, "dropless/rank0/metrics.jsonl"));
  ASSERT_EQ(reference.size(), 10u);
  EXPECT_EQ(losses_of(join_path(folder, "overflowing/rank0/metrics.jsonl")), reference);
  EXPECT_EQ(reruns_of(join_path(folder, "overflowing/rank0/metrics.jsonl")), 10);
  EXPECT_NE(overflowing[0].out.find("MoE reruns 10 (last needed"), std::string::npos) << overflowing[0].out;
  expect_losses_near(losses_of(join_path(folder, "roomy/rank0/metrics.jsonl")), reference, 10, 1e-5, "factor 2");
  EXPECT_EQ(reruns_of(join_path(folder, "roomy/rank0/metrics.jsonl")), 0);
  EXPECT_EQ(reruns_of(join_path(folder, "dropless/rank0/metrics.jsonl")), -1) << "no count without the factor";

  // --moe-paged-stash: the experts park only their real rows, and train as the blocks do without it (a pool of twice
  // the balanced load holds the most a rank can receive at factor 2; the default 1.1 is full in some iterations of
  // this small routing); a pool of a hundredth of the balanced load (pages of one row) is full from the second
  // iteration (the first sizes it), and those iterations run again dropless, counted.
  const std::vector<std::string> stashed_flags = {"--moe-expert-rank-capacity-factor", "2", "--moe-paged-stash"};
  const auto stashed =
      launch(2, pick_port(0), plus(arguments, plus(stashed_flags, {"--moe-paged-stash-buffer-size-factor-cuda", "2"})),
             join_path(folder, "stashed"));
  for (const auto& result : stashed) ASSERT_EQ(result.exit_code, 0) << describe(stashed);
  expect_losses_near(losses_of(join_path(folder, "stashed/rank0/metrics.jsonl")),
                     losses_of(join_path(folder, "roomy/rank0/metrics.jsonl")), 10, 1e-5, "paged stash");
  EXPECT_EQ(reruns_of(join_path(folder, "stashed/rank0/metrics.jsonl")), 0);
  const auto full = launch(2, pick_port(11),
                           plus(arguments, plus(stashed_flags, {"--moe-paged-stash-page-size", "1",
                                                                "--moe-paged-stash-buffer-size-factor-cuda", "0.01"})),
                           join_path(folder, "stash-full"));
  for (const auto& result : full) ASSERT_EQ(result.exit_code, 0) << describe(full);
  expect_losses_near(losses_of(join_path(folder, "stash-full/rank0/metrics.jsonl")), reference, 10, 1e-5,
                     "a full paged stash");
  EXPECT_EQ(reruns_of(join_path(folder, "stash-full/rank0/metrics.jsonl")), 9);
  EXPECT_NE(full[0].out.find("MoE reruns 9 (paged stash full in 9)"), std::string::npos) << full[0].out;
  if (!::testing::Test::HasFailure()) remove_all(folder);
}

}  // namespace
}  // namespace expert_parallel_test
}  // namespace graphed
