// tests/dist/expert_tensor_parallel_launch_test.cpp — `graphed train` with expert and tensor parallelism at once, as
// four ranks on the CPU (Gloo, tests/dist/rank_launch.h): tensor 2 x data 2 with expert 2 over the data ranks, with
// moe-small's MoE on tiny, drop-and-pad and grouped dropless, with and without --sequence-parallel. The ranks follow
// one process over 20 iterations and rank 0 saves one process's checkpoint (every expert, every tensor part, joined
// over the expert group and then the tensor group); a checkpoint crosses layouts both ways. And whole experts
// (--expert-tensor-parallel-size 1) on two and four ranks.
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "dist/expert_test_support.h"
#include "dist/rank_launch.h"
#include "graphed/util/file_system.h"

namespace graphed {
namespace expert_tensor_parallel_test {  // named: the tests build as one unity source
namespace {

using testing::describe;
using testing::expect_losses_near;
using testing::launch;
using testing::losses_of;
using testing::moe_flags;
using testing::pick_port;
using testing::plus;

struct LayoutCase {
  const char* name;
  std::vector<std::string> flags;
};

const std::vector<std::string> kDropAndPad = {"--moe-expert-capacity-factor", "1.0",
                                              "--moe-pad-expert-input-to-capacity"};
const std::vector<std::string> kLayout = {"--tensor-model-parallel-size", "2", "--expert-model-parallel-size", "2"};

const std::vector<LayoutCase>& layout_cases() {
  static const std::vector<LayoutCase> cases = {
      {"drop_and_pad", moe_flags(kDropAndPad)},
      {"drop_and_pad_sequence_parallel", plus(moe_flags(kDropAndPad), {"--sequence-parallel"})},
      {"grouped_dropless", moe_flags({"--moe-grouped-gemm"})},
      {"grouped_dropless_sequence_parallel", moe_flags({"--moe-grouped-gemm", "--sequence-parallel"})}};
  return cases;
}

class ExpertTensorParallelLaunchTest : public testing::InTemporaryFolder<::testing::TestWithParam<LayoutCase>> {
 protected:
  ExpertTensorParallelLaunchTest() : InTemporaryFolder("graphed-expert-tensor-parallel") {}
};

// Each data rank's one microbatch is one of one process's two, so drop-and-pad drops what one process drops (its
// capacity comes from the whole microbatch's tokens, gathered under sequence parallelism).
TEST_P(ExpertTensorParallelLaunchTest, TensorTimesExpertRanksTrainAsOneProcessAndSaveTheWholeModel) {
  const std::vector<std::string> arguments =
      plus(plus(testing::kTinyCpuTrain, GetParam().flags), {"--train-iters", "20", "--save", "checkpoints"});
  const auto one = testing::run_processes({{arguments, {}, {}, join_path(folder_, "one")}});
  ASSERT_EQ(one[0].exit_code, 0) << describe(one);
  const auto ranks = launch(4, pick_port(1), plus(arguments, kLayout), folder_);
  for (const auto& result : ranks) ASSERT_EQ(result.exit_code, 0) << describe(ranks);
  EXPECT_NE(ranks[0].out.find("(data-parallel 2 x pipeline 1 x tensor 2; expert 2 x expert-data 1)"), std::string::npos)
      << ranks[0].out;
  expect_losses_near(losses_of(join_path(folder_, "rank0/metrics.jsonl")),
                     losses_of(join_path(folder_, "one/metrics.jsonl")), 20, 1e-5, GetParam().name);
  testing::expect_checkpoint_near(join_path(folder_, "one/checkpoints/iter_0000020/model.safetensors"),
                                  join_path(folder_, "rank0/checkpoints/iter_0000020/model.safetensors"), 1e-4,
                                  GetParam().name);
  for (const char* other : {"rank1", "rank2", "rank3"}) {
    EXPECT_FALSE(path_exists(join_path(folder_, std::string(other) + "/checkpoints"))) << other;
  }
}

INSTANTIATE_TEST_SUITE_P(Layout, ExpertTensorParallelLaunchTest, ::testing::ValuesIn(layout_cases()),
                         [](const ::testing::TestParamInfo<LayoutCase>& info) { return info.param.name; });

// Whole experts (--expert-tensor-parallel-size 1, with --sequence-parallel): on two ranks the expert group is the
// tensor group (tensor 2 x expert 2, data 1); on four, tensor 2 x data 2 with expert groups {0, 1} and {2, 3} and
// expert-data groups {0, 2} and {1, 3}. Drop-and-pad's capacity comes from each rank's part of the sequence (as
// Megatron computes it), so a factor of 2 (= experts / top-k: no drop) keeps it equal to one process.
TEST(ExpertTensorParallelLaunchTest, WholeExpertsOverTheTensorRanksTrainAsOneProcess) {
  const std::string folder = make_temporary_directory("graphed-whole-experts");
  ASSERT_FALSE(folder.empty());
  const std::vector<std::string> whole = {"--tensor-model-parallel-size",  "2", "--expert-model-parallel-size", "2",
                                          "--expert-tensor-parallel-size", "1", "--sequence-parallel"};
  const std::vector<std::pair<std::string, std::vector<std::string>>> dispatches = {
      {"drop_and_pad", moe_flags({"--moe-expert-capacity-factor", "2.0", "--moe-pad-expert-input-to-capacity"})},
      {"grouped_dropless", moe_flags({"--moe-grouped-gemm"})}};
  int port = 10;  // 10 .. 15
  for (const auto& [name, flags] : dispatches) {
    const std::vector<std::string> arguments =
        plus(plus(testing::kTinyCpuTrain, flags), {"--train-iters", "12", "--save", "checkpoints"});
    const auto one = testing::run_processes({{arguments, {}, {}, join_path(folder, name + "-one")}});
    ASSERT_EQ(one[0].exit_code, 0) << describe(one);
    // Two ranks; four (data 2); four as two pipeline stages of two (each stage's expert group its tensor group).
    const std::vector<std::pair<int, std::vector<std::string>>> layouts = {
        {2, {}}, {4, {}}, {4, {"--pipeline-model-parallel-size", "2"}}};
    for (const auto& [world, stages] : layouts) {
      const std::string where = name + "-" + std::to_string(world) + (stages.empty() ? "" : "-stages");
      const auto ranks =
          launch(world, pick_port(port++), plus(plus(arguments, whole), stages), join_path(folder, where));
      for (const auto& result : ranks) ASSERT_EQ(result.exit_code, 0) << where << "\n" << describe(ranks);
      const std::string data = world == 4 && stages.empty() ? "2" : "1";
      const std::string banner = "(data-parallel " + data + " x pipeline " + (stages.empty() ? "1" : "2") +
                                 " x tensor 2; expert 2 x expert-data " + data + " x expert-tensor 1)";
      EXPECT_NE(ranks[0].out.find(banner), std::string::npos) << where << ranks[0].out;
      expect_losses_near(losses_of(join_path(folder, where + "/rank0/metrics.jsonl")),
                         losses_of(join_path(folder, name + "-one/metrics.jsonl")), 12, 1e-5, where);
      testing::expect_checkpoint_near(join_path(folder, name + "-one/checkpoints/iter_0000012/model.safetensors"),
                                      join_path(folder, where + "/rank0/checkpoints/iter_0000012/model.safetensors"),
                                      1e-4, where);
    }
  }
  if (!::testing::Test::HasFailure()) remove_all(folder);
}

// Whole experts on four tensor ranks with two expert ranks: the expert groups {0, 1} and {2, 3} split one tensor group,
// so ranks 2 and 3 (the second expert-data rank) take no part in the checkpoint's expert join but do in its tensor
// join. Four heads, so that attention splits four ways.
TEST(ExpertTensorParallelLaunchTest, WholeExpertsOnMoreTensorRanksThanExpertRanksSaveTheWholeModel) {
  const std::string folder = make_temporary_directory("graphed-whole-experts-four");
  ASSERT_FALSE(folder.empty());
  const std::vector<std::string> arguments =
      plus(plus(testing::kTinyCpuTrain, moe_flags({"--moe-grouped-gemm"})),
           {"--num-attention-heads", "4", "--train-iters", "8", "--save", "checkpoints"});
  const auto one = testing::run_processes({{arguments, {}, {}, join_path(folder, "one")}});
  ASSERT_EQ(one[0].exit_code, 0) << describe(one);
  const auto ranks =
      launch(4, pick_port(4),
             plus(arguments, {"--tensor-model-parallel-size", "4", "--sequence-parallel",
                              "--expert-model-parallel-size", "2", "--expert-tensor-parallel-size", "1"}),
             join_path(folder, "ranks"));
  for (const auto& result : ranks) ASSERT_EQ(result.exit_code, 0) << describe(ranks);
  EXPECT_NE(ranks[0].out.find("(data-parallel 1 x pipeline 1 x tensor 4; expert 2 x expert-data 2 x expert-tensor 1)"),
            std::string::npos)
      << ranks[0].out;
  expect_losses_near(losses_of(join_path(folder, "ranks/rank0/metrics.jsonl")),
                     losses_of(join_path(folder, "one/metrics.jsonl")), 8, 1e-5, "tensor 4 x expert 2");
  testing::expect_checkpoint_near(join_path(folder, "one/checkpoints/iter_0000008/model.safetensors"),
                                  join_path(folder, "ranks/rank0/checkpoints/iter_0000008/model.safetensors"), 1e-4,
                                  "tensor 4 x expert 2");
  if (!::testing::Test::HasFailure()) remove_all(folder);
}

TEST(ExpertTensorParallelCheckpointTest, AWholeExpertsCheckpointCrossesLayoutsBothWays) {
  const std::string folder = make_temporary_directory("graphed-whole-experts-checkpoint");
  ASSERT_FALSE(folder.empty());
  testing::expect_checkpoint_crosses_layouts(
      plus(plus(testing::kTinyCpuTrain, moe_flags({"--moe-grouped-gemm", "--sequence-parallel"})),
           {"--lr-decay-iters", "20"}),
      {"--tensor-model-parallel-size", "2", "--expert-model-parallel-size", "2", "--expert-tensor-parallel-size", "1"},
      folder, pick_port(8), pick_port(9), "tensor 2 x expert 2 with whole experts", 4);
  if (!::testing::Test::HasFailure()) remove_all(folder);
}

TEST(ExpertTensorParallelCheckpointTest, ACheckpointCrossesLayoutsBothWays) {
  const std::string folder = make_temporary_directory("graphed-expert-tensor-checkpoint");
  ASSERT_FALSE(folder.empty());
  testing::expect_checkpoint_crosses_layouts(
      plus(plus(testing::kTinyCpuTrain, moe_flags({"--moe-grouped-gemm", "--sequence-parallel"})),
           {"--lr-decay-iters", "20"}),
      kLayout, folder, pick_port(2), pick_port(3), "tensor 2 x expert 2", 4);
  if (!::testing::Test::HasFailure()) remove_all(folder);
}

}  // namespace
}  // namespace expert_tensor_parallel_test
}  // namespace graphed
