// tests/dist/mixed_layout_launch_test.cpp — `graphed train` as Gloo CPU ranks in layouts that mix kinds of
// parallelism (DP2xPP2, TP2xDP2, TP2xPP2, TP2xPP2xDP2) against one process; on GPUs: dist-check, part mixed.
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "dist/rank_launch.h"
#include "graphed/util/file_system.h"

namespace graphed {
namespace {

using testing::describe;
using testing::expect_checkpoint_near;
using testing::expect_losses_near;
using testing::launch;
using testing::losses_of;
using testing::pick_port;
using testing::plus;
using testing::ProcessResult;
using testing::run_processes;

// tiny (2 layers, one a stage), 4 microbatches of 2 in one process; every run's learning rate decays over 12
// iterations.
const std::vector<std::string> kMixedTrain =
    plus(testing::kTinyCpuTrain, {"--micro-batch-size", "2", "--lr-decay-iters", "12"});

/// `world` ranks of `arguments` in folder/<name><rank>, beside one process in folder/<name>-one (all at once).
std::vector<ProcessResult> with_one_process(int world, int port, const std::vector<std::string>& one,
                                            const std::vector<std::string>& ranks, const std::string& folder,
                                            const std::string& name) {
  std::vector<testing::ProcessSpec> specs = {{one, {}, {}, join_path(folder, name + "-one")}};
  for (int rank = 0; rank < world; ++rank) {
    specs.push_back(
        {ranks, testing::rank_environment(world, rank, port), {}, join_path(folder, name + std::to_string(rank))});
  }
  return run_processes(specs);
}

TEST(TensorParallelPipelineTest, TwoTensorRanksTimesTwoStagesTrainAsOneProcessAndResume) {
  const std::string folder = make_temporary_directory("graphed-tensor-pipeline");
  ASSERT_FALSE(folder.empty());
  const std::vector<std::string> arguments = plus(kMixedTrain, {"--save", "checkpoints"});
  const std::vector<std::string> layout = {"--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2"};
  const auto first =
      with_one_process(4, pick_port(13), plus(arguments, {"--train-iters", "12", "--save-interval", "10"}),
                       plus(plus(arguments, layout), {"--train-iters", "10"}), folder, "first");
  for (const auto& result : first) ASSERT_EQ(result.exit_code, 0) << describe(first);
  EXPECT_NE(first[1].out.find("(data-parallel 1 x pipeline 2 x tensor 2)"), std::string::npos) << first[1].out;
  std::map<int64_t, double> early;
  for (const auto& [iteration, loss] : losses_of(join_path(folder, "first-one/metrics.jsonl"))) {
    if (iteration <= 10) early[iteration] = loss;
  }
  expect_losses_near(losses_of(join_path(folder, "first0/metrics.jsonl")), early, 10, 1e-5, "TP=2 x PP=2");
  // The 4 ranks' checkpoint is the whole model: one process's names and shapes and values.
  expect_checkpoint_near(join_path(folder, "first-one/checkpoints/iter_0000010/model.safetensors"),
                         join_path(folder, "first0/checkpoints/iter_0000010/model.safetensors"), 1e-4, "TP=2 x PP=2");
  // And the 4 ranks resume one process's checkpoint at iteration 10 as that process went on.
  const std::string saved = join_path(folder, "first-one/checkpoints/iter_0000010");
  const auto resumed = launch(4, pick_port(14), plus(plus(arguments, layout), {"--train-iters", "12", "--load", saved}),
                              join_path(folder, "resumed"));
  for (const auto& result : resumed) ASSERT_EQ(result.exit_code, 0) << describe(resumed);
  std::map<int64_t, double> later;
  for (const auto& [iteration, loss] : losses_of(join_path(folder, "first-one/metrics.jsonl"))) {
    if (iteration > 10) later[iteration] = loss;
  }
  expect_losses_near(losses_of(join_path(folder, "resumed/rank0/metrics.jsonl")), later, 2, 1e-5, "resumed");
  remove_all(folder);
}

struct MixedLayout {
  const char* name;
  int world;
  std::vector<std::string> flags;
  const char* banner;  ///< how the launch describes itself
};

void PrintTo(const MixedLayout& layout, std::ostream* out) { *out << layout.name; }  // ctest's names

class MixedLayoutLaunchTest : public testing::InTemporaryFolder<::testing::TestWithParam<MixedLayout>> {
 protected:
  MixedLayoutLaunchTest() : InTemporaryFolder("graphed-mixed-layout") {}
};

TEST_P(MixedLayoutLaunchTest, RanksTrainAsOneProcessAndSaveTheWholeModel) {
  const MixedLayout& layout = GetParam();
  const std::vector<std::string> arguments = plus(kMixedTrain, {"--train-iters", "10", "--save", "checkpoints"});
  const auto results =
      with_one_process(layout.world, pick_port(15), arguments, plus(arguments, layout.flags), folder_, "ranks");
  for (const auto& result : results) ASSERT_EQ(result.exit_code, 0) << describe(results);
  EXPECT_NE(results[1].out.find(layout.banner), std::string::npos) << results[1].out;
  // The ranks add the same fp32 gradients in another order (2 microbatches a data-parallel rank, then the
  // ranks' sums; partial sums of the tensor ranks): rounding apart, 1e-5.
  expect_losses_near(losses_of(join_path(folder_, "ranks0/metrics.jsonl")),
                     losses_of(join_path(folder_, "ranks-one/metrics.jsonl")), 10, 1e-5, layout.name);
  // The checkpoint is the whole model: one process's names and shapes, the values up to that rounding.
  expect_checkpoint_near(join_path(folder_, "ranks-one/checkpoints/iter_0000010/model.safetensors"),
                         join_path(folder_, "ranks0/checkpoints/iter_0000010/model.safetensors"), 1e-4, layout.name);
}

const std::vector<MixedLayout>& mixed_layouts() {
  static const std::vector<MixedLayout> layouts = {
      {"data2_pipeline2", 4, {"--pipeline-model-parallel-size", "2"}, "(data-parallel 2 x pipeline 2 x tensor 1)"},
      {"tensor2_data2", 4, {"--tensor-model-parallel-size", "2"}, "(data-parallel 2 x pipeline 1 x tensor 2)"},
      {"tensor2_data2_sequence_parallel",
       4,
       {"--tensor-model-parallel-size", "2", "--sequence-parallel"},
       "(data-parallel 2 x pipeline 1 x tensor 2)"},
      {"tensor2_pipeline2_data2",
       8,
       {"--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2"},
       "(data-parallel 2 x pipeline 2 x tensor 2)"}};
  return layouts;
}

INSTANTIATE_TEST_SUITE_P(Layouts, MixedLayoutLaunchTest, ::testing::ValuesIn(mixed_layouts()),
                         [](const ::testing::TestParamInfo<MixedLayout>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace graphed
