// tests/train/full_iteration_cuda_test.cpp — --cuda-graph-impl full_iteration against eager on the
// GPU: tiny, small, moe-small (drop-and-pad) and moe-small made dropless with --moe-grouped-gemm, with and without
// --optimizer-cuda-graph, 50 steps:
// losses, final parameters and evaluation losses bitwise equal to eager (eager itself is checked to
// be bitwise reproducible first); static batch addresses stay put; delete and
// re-capture; with dropout the masks change and the curve stays close to eager.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>

#include "cuda_test.h"
#include "graphed/config/presets.h"
#include "graphed/train/full_iteration_runner.h"
#include "graphed/train/trainer.h"
#include "train/train_run_for_test.h"

namespace graphed::train {
namespace {

using graphed::testing::bitwise_equal;
using graphed::testing::max_difference;
using graphed::testing::preset_config;
using graphed::testing::TrainRun;

TrainRun train(const config::RunConfig& config, int steps) {
  Trainer trainer(config, TokenDataset::open(config.train, config.model, "", config.train.eval_iters),
                  at::Device(at::kCUDA, 0));
  const auto* graphs = dynamic_cast<const FullIterationRunner*>(&trainer.runner());
  TrainRun run;
  std::vector<const void*> addresses;
  for (int it = 0; it < steps; ++it) {
    run.losses.push_back(trainer.train_step(it).loss.item<double>());
    if (graphs && it == config.cuda_graph.warmup_steps) addresses = graphs->training_batch_buffer().addresses();
  }
  if (graphs) {
    EXPECT_TRUE(graphs->training_graph().is_captured());
    EXPECT_EQ(graphs->training_batch_buffer().addresses(), addresses) << "static inputs moved";
  }
  run.evaluation = trainer.evaluate(0);
  if (graphs) EXPECT_TRUE(graphs->evaluation_graph().is_captured());
  for (const auto& p : trainer.model()->parameters()) run.parameters.push_back(p.detach().clone());
  return run;
}

using FullIterationCudaTest = graphed::testing::CudaTestWithParam<std::tuple<std::string, bool>>;

/// The preset's settings: "moe-small-grouped" is moe-small with dropless MoE through --moe-grouped-gemm.
nlohmann::json settings_of(const std::string& preset, nlohmann::json more) {
  more["global_batch_size"] = 16;
  if (preset == "moe-small-grouped") more.update(graphed::testing::grouped_dropless_moe());
  return more;
}

std::string preset_of(const std::string& name) { return name == "moe-small-grouped" ? "moe-small" : name; }

TEST_P(FullIterationCudaTest, FiftyStepsEqualEager) {
  const auto& [preset, optimizer_inside] = GetParam();
  const TrainRun eager = train(preset_config(preset_of(preset), settings_of(preset, nlohmann::json::object())), 50);
  const TrainRun eager_again =
      train(preset_config(preset_of(preset), settings_of(preset, nlohmann::json::object())), 50);
  const TrainRun graphed =
      train(preset_config(preset_of(preset), settings_of(preset, {{"cuda_graph_impl", "full_iteration"},
                                                                  {"optimizer_cuda_graph", optimizer_inside}})),
            50);
  ASSERT_EQ(graphed.losses.size(), 50u);
  ASSERT_TRUE(bitwise_equal(eager, eager_again))
      << preset << ": eager training is not bitwise reproducible on this GPU (max loss difference "
      << max_difference(eager, eager_again) << "), so graph-vs-eager can only be compared within that spread";
  EXPECT_TRUE(bitwise_equal(graphed, eager))
      << preset << ": the graph differs from eager; max loss difference " << max_difference(graphed, eager)
      << ", evaluation " << graphed.evaluation << " vs " << eager.evaluation;
}

INSTANTIATE_TEST_SUITE_P(Presets, FullIterationCudaTest,
                         ::testing::Combine(::testing::Values("tiny", "small", "moe-small", "moe-small-grouped"),
                                            ::testing::Bool()),
                         [](const auto& info) {
                           std::string name = std::get<0>(info.param) +
                                              (std::get<1>(info.param) ? "_optimizer_in_graph" : "_optimizer_eager");
                           for (auto& c : name) c = c == '-' ? '_' : c;
                           return name;
                         });

using FullIterationCudaDropoutTest = graphed::testing::CudaTest;
using FullIterationCudaDeleteTest = graphed::testing::CudaTest;

// With dropout, replays draw fresh masks (the default CUDA generator is registered with the graph and
// its Philox offset advances by the graph's whole increment per replay), and because the graph consumes
// the generator exactly as the eager iteration does, the graphed run reproduces eager's random stream:
// the losses are the same, bit for bit. A run without dropout shows that dropout is active.
TEST_F(FullIterationCudaDropoutTest, DropoutFollowsTheEagerRandomStream) {
  const nlohmann::json dropout{{"attention_dropout", 0.1}, {"hidden_dropout", 0.1}, {"micro_batch_size", 8}};
  nlohmann::json graphed_settings = dropout;
  graphed_settings.update({{"cuda_graph_impl", "full_iteration"}, {"optimizer_cuda_graph", true}});
  const TrainRun eager = train(preset_config("tiny", dropout), 30);
  const TrainRun graphed = train(preset_config("tiny", graphed_settings), 30);
  const TrainRun no_dropout = train(preset_config("tiny", {{"micro_batch_size", 8}}), 30);
  EXPECT_NE(eager.losses, no_dropout.losses) << "dropout must change the losses";
  EXPECT_EQ(graphed.losses, eager.losses) << "the graph must consume the RNG exactly as eager does";
  for (std::size_t i = 0; i < graphed.parameters.size(); ++i)
    EXPECT_TRUE(at::equal(graphed.parameters[i], eager.parameters[i]));
}

TEST_F(FullIterationCudaDeleteTest, DeleteThenRecaptureKeepsTraining) {
  const config::RunConfig eager_config = preset_config("tiny", nlohmann::json::object());
  const config::RunConfig graphed_config = preset_config("tiny", {{"cuda_graph_impl", "full_iteration"}});
  Trainer eager(eager_config, TokenDataset::open(eager_config.train, eager_config.model, "", 0),
                at::Device(at::kCUDA, 0));
  Trainer graphed(graphed_config, TokenDataset::open(graphed_config.train, graphed_config.model, "", 0),
                  at::Device(at::kCUDA, 0));
  for (int it = 0; it < 20; ++it) {
    if (it == 10) {
      graphed.delete_cuda_graphs();
      EXPECT_EQ(graphed.runner().graph_count(), 0);
    }
    EXPECT_EQ(graphed.train_step(it).loss.item<double>(), eager.train_step(it).loss.item<double>())
        << "iteration " << it;
  }
  EXPECT_TRUE(graphed.runner().capture_report().has_value()) << "captured again after the delete";
}

}  // namespace
}  // namespace graphed::train
