// tests/dist/distributed_optimizer_launch_test.cpp — `graphed train --use-distributed-optimizer` as Gloo CPU ranks:
// sharded against not sharded in the same layout and against one process, in layouts that shard the tied embedding
// over pipeline stages, leave tensor duplicates out of the norm, and shard the experts over expert-data ranks; and a
// checkpoint saved sharded at DP=2 resumed by one process and by two tensor ranks; and the sums in bf16
// (--grad-reduce-in-bf16). On GPUs: dist-check, part dist-opt.
#include <map>
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
using testing::expect_tensors_near;
using testing::launch;
using testing::losses_of;
using testing::pick_port;
using testing::plus;
using testing::ProcessResult;
using testing::run_processes;

const std::vector<std::string> kSharded = {"--use-distributed-optimizer"};

/// The iterations after `after` of a metrics file's losses.
std::map<int64_t, double> losses_after(const std::string& metrics, int64_t after) {
  std::map<int64_t, double> later;
  for (const auto& [iteration, loss] : losses_of(metrics)) {
    if (iteration > after) later[iteration] = loss;
  }
  return later;
}

/// A sharded checkpoint's moments are in one file per rank, each holding about its share of them, and
/// optimizer.safetensors holds none.
void expect_moments_written_per_rank(const std::string& checkpoint, int ranks) {
  for (const auto& [name, tensor] : read_safetensors(join_path(checkpoint, "optimizer.safetensors"))) {
    EXPECT_EQ(name.find(".exp_avg"), std::string::npos) << name << " in optimizer.safetensors";
  }
  std::vector<int64_t> elements;
  for (int rank = 0; rank < ranks; ++rank) {
    const std::string file = join_path(checkpoint, "optimizer_shards/rank" + std::to_string(rank) + ".safetensors");
    ASSERT_TRUE(path_exists(file)) << file;
    int64_t count = 0;
    for (const auto& [name, values] : read_safetensors(file)) count += values.numel();
    elements.push_back(count);
  }
  int64_t total = 0;
  for (const int64_t count : elements) total += count;
  for (int rank = 0; rank < ranks; ++rank) {
    EXPECT_NEAR(static_cast<double>(elements[static_cast<std::size_t>(rank)]) / static_cast<double>(total), 1.0 / ranks,
                0.1 / ranks)
        << "rank " << rank << "'s share of the moments";
  }
}

class DistributedOptimizerTest : public testing::InTemporaryFolder<::testing::Test> {
 protected:
  DistributedOptimizerTest() : InTemporaryFolder("graphed-distributed-optimizer") {}
};

// Sharded and not, both DP=2, at once: the same sums of the same gradients (reduce-scatter and all-reduce each add
// the two ranks' values), so the losses, the model and the optimizer state (gathered whole) agree to rounding.
// Then the sharded checkpoint of iteration 10 resumes in one process and on two tensor ranks as the unsharded run
// went on, and the unsharded checkpoint resumes sharded.
TEST_F(DistributedOptimizerTest, ShardedTrainsAsUnshardedAndItsCheckpointResumesElsewhere) {
  // Every run's learning rate decays over 12 iterations, whichever iteration it stops at.
  const std::vector<std::string> arguments =
      plus(testing::kTinyCpuTrain, {"--save", "checkpoints", "--lr-decay-iters", "12"});
  const int sharded_port = pick_port(16), plain_port = pick_port(17);
  // The sharded ranks save into one folder (as ranks on a shared file system do), so each writes its own shards.
  const auto sharded_arguments =
      plus(plus(arguments, kSharded), {"--train-iters", "10", "--overlap-grad-reduce", "--overlap-param-gather",
                                       "--save", join_path(folder_, "sharded-checkpoints")});
  const auto plain_arguments = plus(arguments, {"--train-iters", "12", "--save-interval", "10"});
  std::vector<testing::ProcessSpec> specs;
  for (int rank = 0; rank < 2; ++rank) {
    specs.push_back({sharded_arguments,
                     testing::rank_environment(2, rank, sharded_port),
                     {},
                     join_path(folder_, "sharded" + std::to_string(rank))});
    specs.push_back({plain_arguments,
                     testing::rank_environment(2, rank, plain_port),
                     {},
                     join_path(folder_, "plain" + std::to_string(rank))});
  }
  const auto first = run_processes(specs);
  for (const auto& result : first) ASSERT_EQ(result.exit_code, 0) << describe(first);
  EXPECT_NE(first[0].out.find("optimizer sharded over the data-parallel ranks"), std::string::npos) << first[0].out;
  std::map<int64_t, double> early;
  for (const auto& [iteration, loss] : losses_of(join_path(folder_, "plain0/metrics.jsonl"))) {
    if (iteration <= 10) early[iteration] = loss;
  }
  expect_losses_near(losses_of(join_path(folder_, "sharded0/metrics.jsonl")), early, 10, 1e-6, "sharded");
  const std::string saved = join_path(folder_, "sharded-checkpoints/iter_0000010");
  const std::string plain_saved = join_path(folder_, "plain0/checkpoints/iter_0000010");
  expect_checkpoint_near(join_path(plain_saved, "model.safetensors"), join_path(saved, "model.safetensors"), 1e-5,
                         "model.safetensors");
  expect_tensors_near(testing::read_optimizer_state(plain_saved), testing::read_optimizer_state(saved), 1e-5,
                      "the optimizer's state");
  expect_moments_written_per_rank(saved, 2);
  const auto resume = plus(testing::kTinyCpuTrain, {"--train-iters", "12", "--lr-decay-iters", "12", "--load", saved});
  // And the other way: the unsharded checkpoint resumed sharded (each rank keeps its shard of the moments).
  const auto unsharded_resume =
      plus(plus(testing::kTinyCpuTrain, kSharded), {"--train-iters", "12", "--lr-decay-iters", "12", "--load",
                                                    join_path(folder_, "plain0/checkpoints/iter_0000010")});
  const int tensor_port = pick_port(18), sharded_resume_port = pick_port(20), own_runs_port = pick_port(25);
  std::vector<testing::ProcessSpec> resume_specs = {{resume, {}, {}, join_path(folder_, "one")}};
  for (int rank = 0; rank < 2; ++rank) {
    // Sharded again: each rank reads only the runs its shards overlap.
    resume_specs.push_back({plus(resume, kSharded),
                            testing::rank_environment(2, rank, own_runs_port),
                            {},
                            join_path(folder_, "own-runs" + std::to_string(rank))});
    resume_specs.push_back({plus(resume, {"--tensor-model-parallel-size", "2"}),
                            testing::rank_environment(2, rank, tensor_port),
                            {},
                            join_path(folder_, "tensor" + std::to_string(rank))});
    resume_specs.push_back({unsharded_resume,
                            testing::rank_environment(2, rank, sharded_resume_port),
                            {},
                            join_path(folder_, "resharded" + std::to_string(rank))});
  }
  const auto resumed = run_processes(resume_specs);
  for (const auto& result : resumed) ASSERT_EQ(result.exit_code, 0) << describe(resumed);
  const auto later = losses_after(join_path(folder_, "plain0/metrics.jsonl"), 10);
  expect_losses_near(losses_of(join_path(folder_, "one/metrics.jsonl")), later, 2, 1e-5, "resumed by one process");
  expect_losses_near(losses_of(join_path(folder_, "tensor0/metrics.jsonl")), later, 2, 1e-5,
                     "resumed by two tensor ranks");
  expect_losses_near(losses_of(join_path(folder_, "resharded0/metrics.jsonl")), later, 2, 1e-6,
                     "the unsharded checkpoint resumed sharded");
  expect_losses_near(losses_of(join_path(folder_, "own-runs0/metrics.jsonl")), later, 2, 1e-6,
                     "the sharded checkpoint resumed sharded");
}

// --grad-reduce-in-bf16 at DP=2, sharded and not: the sums are rounded to bf16 (on Gloo: summed in float32 and rounded
// once), so both runs leave one process's losses by that rounding, and agree with each other to AdamW's rounding
// (the same bf16 sums, divided alike).
TEST_F(DistributedOptimizerTest, BfloatSumsTrainNearFloatSumsShardedOrNot) {
  const std::vector<std::string> arguments =
      plus(testing::kTinyCpuTrain, {"--train-iters", "8", "--grad-reduce-in-bf16"});
  const int sharded_port = pick_port(23), plain_port = pick_port(24);
  std::vector<testing::ProcessSpec> specs = {
      {plus(testing::kTinyCpuTrain, {"--train-iters", "8"}), {}, {}, join_path(folder_, "one")}};
  for (int rank = 0; rank < 2; ++rank) {
    // Each rank saves into a folder of its own, as ranks on nodes without a shared file system: rank 0 writes all.
    specs.push_back({plus(plus(arguments, kSharded), {"--save", "checkpoints"}),
                     testing::rank_environment(2, rank, sharded_port),
                     {},
                     join_path(folder_, "sharded" + std::to_string(rank))});
    specs.push_back({arguments,
                     testing::rank_environment(2, rank, plain_port),
                     {},
                     join_path(folder_, "plain" + std::to_string(rank))});
  }
  const auto results = run_processes(specs);
  for (const auto& result : results) ASSERT_EQ(result.exit_code, 0) << describe(results);
  const auto one = losses_of(join_path(folder_, "one/metrics.jsonl"));
  const auto sharded = losses_of(join_path(folder_, "sharded0/metrics.jsonl"));
  const auto plain = losses_of(join_path(folder_, "plain0/metrics.jsonl"));
  expect_losses_near(sharded, one, 8, 1e-2, "bf16 sums, sharded, against one process");
  expect_losses_near(plain, one, 8, 1e-2, "bf16 sums against one process");
  expect_losses_near(sharded, plain, 8, 1e-5, "bf16 sums, sharded against not");
  EXPECT_NE(sharded, one) << "the bf16 sums changed nothing: were they float32?";
  const std::string saved = join_path(folder_, "sharded0/checkpoints/iter_0000008");
  EXPECT_FALSE(path_exists(join_path(saved, "optimizer_shards")));
  EXPECT_TRUE(read_safetensors(join_path(saved, "optimizer.safetensors")).count("word_embeddings.exp_avg"));
  EXPECT_NE(results[1].err.find("the --save folder is not one file system for every rank"), std::string::npos)
      << results[1].err;
}

struct ShardedLayout {
  const char* name;
  int world;
  std::vector<std::string> flags;        ///< the layout's
  std::vector<std::string> model_flags;  ///< the model's, one process's too
  double tolerance = 1e-5;               ///< the losses' relative difference from one process's
};

void PrintTo(const ShardedLayout& layout, std::ostream* out) { *out << layout.name; }  // ctest's names

class ShardedLayoutTest : public testing::InTemporaryFolder<::testing::TestWithParam<ShardedLayout>> {
 protected:
  ShardedLayoutTest() : InTemporaryFolder("graphed-sharded-layout") {}
};

// Each layout sharded against one process (which shards nothing): the losses to rounding, and the checkpoint the
// whole model.
TEST_P(ShardedLayoutTest, ShardedRanksTrainAsOneProcess) {
  const ShardedLayout& layout = GetParam();
  // One process trains 10 iterations (saving at 8) while the ranks train 8 and save, then go on from their checkpoint;
  // the learning rate decays over 10 iterations in every run.
  const std::vector<std::string> arguments =
      plus(plus(testing::kTinyCpuTrain, layout.model_flags), {"--micro-batch-size", "2", "--lr-decay-iters", "10"});
  const auto ranks_arguments = plus(plus(arguments, kSharded), layout.flags);
  const int port = pick_port(19);
  std::vector<testing::ProcessSpec> specs = {
      {plus(arguments, {"--train-iters", "10", "--save", "checkpoints", "--save-interval", "8"}),
       {},
       {},
       join_path(folder_, "one")}};
  for (int rank = 0; rank < layout.world; ++rank) {
    specs.push_back({plus(ranks_arguments, {"--train-iters", "8", "--save", join_path(folder_, "shared")}),
                     testing::rank_environment(layout.world, rank, port),
                     {},
                     join_path(folder_, "rank" + std::to_string(rank))});
  }
  const auto results = run_processes(specs);
  for (const auto& result : results) ASSERT_EQ(result.exit_code, 0) << describe(results);
  const auto one_losses = losses_of(join_path(folder_, "one/metrics.jsonl"));
  std::map<int64_t, double> first_eight, last_two;
  for (const auto& [iteration, loss] : one_losses) (iteration <= 8 ? first_eight : last_two)[iteration] = loss;
  expect_losses_near(losses_of(join_path(folder_, "rank0/metrics.jsonl")), first_eight, 8, layout.tolerance,
                     layout.name);
  const std::string one = join_path(folder_, "one/checkpoints/iter_0000008");
  const std::string saved = join_path(folder_, "shared/iter_0000008");
  expect_checkpoint_near(join_path(one, "model.safetensors"), join_path(saved, "model.safetensors"),
                         10 * layout.tolerance, std::string(layout.name) + " model.safetensors");
  expect_tensors_near(testing::read_optimizer_state(one), testing::read_optimizer_state(saved), 10 * layout.tolerance,
                      std::string(layout.name) + " optimizer state");
  // The ranks go on from their checkpoint (each reading its own shards where the moments were written per rank).
  std::vector<testing::ProcessSpec> resumed;
  for (int rank = 0; rank < layout.world; ++rank) {
    resumed.push_back({plus(ranks_arguments, {"--train-iters", "10", "--load", join_path(folder_, "shared")}),
                       testing::rank_environment(layout.world, rank, port),
                       {},
                       join_path(folder_, "resumed" + std::to_string(rank))});
  }
  const auto again = run_processes(resumed);
  for (const auto& result : again) ASSERT_EQ(result.exit_code, 0) << describe(again);
  expect_losses_near(losses_of(join_path(folder_, "resumed0/metrics.jsonl")), last_two, 2, layout.tolerance,
                     std::string(layout.name) + " resumed");
}

const std::vector<std::string> kMoe = {"--num-experts",         "4",   "--moe-router-topk",    "2",
                                       "--moe-ffn-hidden-size", "256", "--moe-aux-loss-coeff", "0.01",
                                       "--moe-grouped-gemm"};

INSTANTIATE_TEST_SUITE_P(
    Layouts, ShardedLayoutTest,
    ::testing::Values(
        ShardedLayout{"dp2_pp2", 4, {"--pipeline-model-parallel-size", "2"}},
        ShardedLayout{"tp2_dp2", 4, {"--tensor-model-parallel-size", "2", "--sequence-parallel"}},
        ShardedLayout{"dp4_ep2", 4, {"--expert-model-parallel-size", "2"}, kMoe},
        // The experts' sums over two expert-data ranks in bf16 too (their own staging slice).
        ShardedLayout{
            "dp4_ep2_bf16_sums", 4, {"--expert-model-parallel-size", "2", "--grad-reduce-in-bf16"}, kMoe, 1e-2}),
    [](const ::testing::TestParamInfo<ShardedLayout>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace graphed
