// tests/train/layer_graphs_cuda_test.cpp — --cuda-graph-impl transformer_engine against eager on the
// GPU: tiny with modules {whole layer}, {attn}, {mlp}, {attn, mlp}; moe-small with {attn, moe_router,
// moe_preprocess} (drop-and-pad and dropless), {attn, moe} and {whole layer} (drop-and-pad); 50 steps of
// 2 microbatches: losses, evaluation and final parameters bitwise equal to eager (eager first checked
// reproducible). Also: one graph set per microbatch slot equals eager, dropout follows eager's random
// stream, a mismatched call names the unit and argument, delete + re-capture keeps training.
#include <gtest/gtest.h>

#include "cuda_test.h"
#include "graphed/capture/cuda_graph.h"
#include "graphed/train/layer_graph_helper.h"
#include "graphed/train/trainer.h"
#include "graphed/util/compat.h"
#include "train/train_run_for_test.h"

namespace graphed::train {
namespace {

using graphed::testing::dropless_moe;
using graphed::testing::GraphCase;
using graphed::testing::grouped_dropless_moe;
using graphed::testing::preset_config;

using LayerGraphsCudaTest = graphed::testing::CudaTestWithParam<GraphCase>;

TEST_P(LayerGraphsCudaTest, FiftyStepsOfTwoMicrobatchesEqualEager) {
  graphed::testing::expect_graphed_run_equals_eager(GetParam(), "transformer_engine", 50);
}

INSTANTIATE_TEST_SUITE_P(
    Modules, LayerGraphsCudaTest,
    ::testing::Values(GraphCase{"tiny_whole_layer", "tiny", {}}, GraphCase{"tiny_attn", "tiny", {"attn"}},
                      GraphCase{"tiny_mlp", "tiny", {"mlp"}}, GraphCase{"tiny_attn_mlp", "tiny", {"attn", "mlp"}},
                      GraphCase{"moe_attn_router_preprocess", "moe-small", {"attn", "moe_router", "moe_preprocess"}},
                      GraphCase{"moe_dropless_attn_router_preprocess",
                                "moe-small",
                                {"attn", "moe_router", "moe_preprocess"},
                                dropless_moe()},
                      GraphCase{"moe_attn_moe", "moe-small", {"attn", "moe"}},
                      GraphCase{"moe_whole_layer", "moe-small", {}},
                      GraphCase{"moe_grouped_attn_moe", "moe-small", {"attn", "moe"}, grouped_dropless_moe()},
                      GraphCase{"moe_grouped_whole_layer", "moe-small", {}, grouped_dropless_moe()},
                      GraphCase{"tiny_without_stage_units", "tiny", {}, {}, {{"cuda_graph_stage_units", false}}}),
    [](const auto& info) { return info.param.name; });

/// One forward/backward of every microbatch of a step, grads returned (scaled as the trainer does).
std::vector<at::Tensor> step_grads(model::GptModel& model, const std::vector<Batch>& batches) {
  for (const auto& p : model->parameters()) {  // zeroed in place, as the trainer's optimizer does
    if (p.grad().defined()) {
      p.mutable_grad().zero_();
    } else {
      p.mutable_grad() = at::zeros_like(p);
    }
  }
  for (std::size_t m = 0; m < batches.size(); ++m) {
    compat::AutocastScope autocast(true);
    (model->forward(batches[m].tokens, batches[m].labels, static_cast<int64_t>(m)).loss * 0.5).backward();
  }
  std::vector<at::Tensor> grads;
  for (const auto& p : model->parameters()) grads.push_back(p.grad().clone());
  return grads;
}

using LayerGraphSlotsCudaTest = graphed::testing::CudaTest;

TEST_F(LayerGraphSlotsCudaTest, OneGraphSetPerMicrobatchSlotEqualsEager) {
  const config::RunConfig config = preset_config("small", {{"global_batch_size", 16}});
  const at::Device device(at::kCUDA, 0);
  capture::SideStream stream(device);
  capture::SideStream::Use use(stream);
  at::manual_seed(3);
  model::GptModel eager(config.model, config.moe_layers);
  at::manual_seed(3);
  model::GptModel graphed(config.model, config.moe_layers);
  eager->to(device);
  graphed->to(device);
  const TokenDataset data = TokenDataset::open(config.train, config.model, "", 0);
  const auto batches = [&](int64_t step) {
    std::vector<Batch> result;
    for (int64_t m = 0; m < 2; ++m) {
      const Batch b = data.batch(Split::kTrain, (step * 2 + m) * 8, 8);
      result.push_back({b.tokens.to(device), b.labels.to(device)});
    }
    return result;
  };
  config::CudaGraphConfig graph_config;
  graph_config.impl = config::CudaGraphImpl::kTransformerEngine;
  graph_config.modules = {config::CudaGraphModule::kAttn, config::CudaGraphModule::kMlp};
  LayerGraphOptions options;
  options.captured_microbatches = 2;
  options.runtime_microbatches = 2;
  options.autocast = true;
  for (const auto& p : graphed->parameters()) p.mutable_grad() = at::zeros_like(p);  // accumulated inside the graphs
  LayerGraphHelper helper(graphed, graph_config, options);
  const std::vector<Batch> first = batches(0);
  helper.capture(
      [&] {
        compat::AutocastScope autocast(true);
        graphed->forward(first[0].tokens, first[0].labels, 0);
      },
      device);
  ASSERT_EQ(helper.callables().size(), 2u * 10u) << "2 slots x (embedding, 4 layers x attention + MLP, loss)";
  EXPECT_TRUE(helper.callables()[0]->is_captured());
  for (int64_t step = 0; step < 3; ++step) {
    const auto b = batches(step);
    const auto expected = step_grads(eager, b);
    const auto got = step_grads(graphed, b);
    for (std::size_t i = 0; i < expected.size(); ++i) {
      EXPECT_TRUE(at::equal(got[i], expected[i])) << "step " << step << " parameter " << i;
    }
  }
}

using LayerGraphsCudaDropoutTest = graphed::testing::CudaTest;
using LayerGraphsCudaErrorTest = graphed::testing::CudaTest;
using LayerGraphsCudaDeleteTest = graphed::testing::CudaTest;

TEST_F(LayerGraphsCudaDropoutTest, DropoutFollowsTheEagerRandomStream) {
  graphed::testing::expect_dropout_follows_eager("transformer_engine");
}

TEST_F(LayerGraphsCudaErrorTest, CallWithOtherShapeNamesUnitAndArgument) {
  const std::string message = graphed::testing::error_of_other_batch_after_capture(
      {{"cuda_graph_impl", "transformer_engine"}, {"cuda_graph_modules", {"attn"}}, {"cuda_graph_warmup_steps", 1}});
  EXPECT_EQ(
      message.rfind("unit embedding (microbatch 0): argument 'tokens' (argument 0) has shape [2, 64], captured with "
                    "[8, 64]",
                    0),
      0u)
      << message;
}

TEST_F(LayerGraphsCudaDeleteTest, DeleteThenRecaptureKeepsEagerLosses) {
  graphed::testing::expect_delete_then_capture_again_keeps_eager_losses("transformer_engine");
}

}  // namespace
}  // namespace graphed::train
