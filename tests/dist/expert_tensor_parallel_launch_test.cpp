// tests/dist/expert_tensor_parallel_launch_test.cpp — `graphed train` with expert and tensor parallelism at once, as
// four ranks on the CPU (Gloo, tests/dist/rank_launch.h): tensor 2 x data 2 with expert 2 over the data ranks, with
// moe-small's MoE on tiny, drop-and-pad and grouped dropless, with and without --sequence-parallel. The ranks follow
// one process over 20 iterations and rank 0 saves one process's checkpoint (every expert, every tensor part, joined
// over the expert group and then the tensor group); a checkpoint crosses layouts both ways.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "dist/rank_launch.h"
#include "graphed/util/file_system.h"

namespace graphed {
namespace expert_tensor_parallel_test {  // named: the tests build as one unity source
namespace {

using testing::describe;
using testing::expect_losses_near;
using testing::launch;
using testing::losses_of;
using testing::pick_port;
using testing::plus;

struct LayoutCase {
  const char* name;
  std::vector<std::string> flags;
};

/// moe-small's MoE on tiny (4 experts, top-2), dispatched all-to-all.
std::vector<std::string> moe_flags(const std::vector<std::string>& dispatch) {
  return plus({"--num-experts", "4", "--moe-router-topk", "2", "--moe-ffn-hidden-size", "256", "--moe-aux-loss-coeff",
               "0.01", "--moe-token-dispatcher-type", "alltoall"},
              dispatch);
}

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
  EXPECT_NE(ranks[0].out.find("(data-parallel 2 x pipeline 1 x tensor 2; expert 2 x expert-data 1)"),
            std::string::npos)
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
