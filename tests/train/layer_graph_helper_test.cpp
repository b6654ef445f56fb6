// tests/train/layer_graph_helper_test.cpp — how --cuda-graph-modules routes to the units a layer
// graphs under --cuda-graph-impl transformer_engine (research megatron-cudagraphs.md §1.11), how many
// units a model gets, and that the helper's PP = 1 schedule needs one sample buffer set per unit
// whatever the number of captured microbatches. The capture itself runs on the GPU
// (layer_graphs_cuda_test.cpp); the CPU trainer refuses the impl with a clear error.
#include "graphed/train/layer_graph_helper.h"

#include <gtest/gtest.h>

#include "error_text.h"
#include "graphed/capture/sample_buffer_plan.h"
#include "graphed/capture/schedule_order.h"
#include "graphed/train/trainer.h"
#include "run_config_for_test.h"

namespace graphed::train {
namespace {

using config::CudaGraphModule;
using model::LayerUnit;

config::CudaGraphConfig modules(std::vector<CudaGraphModule> selected) {
  config::CudaGraphConfig config;
  config.impl = config::CudaGraphImpl::kTransformerEngine;
  config.modules = std::move(selected);
  return config;
}

TEST(LayerGraphRoutingTest, ModulesSelectUnitsPerLayerKind) {
  using M = CudaGraphModule;
  using U = LayerUnit;
  const auto dense = [](std::vector<M> m) { return graphed_layer_units(modules(std::move(m)), false); };
  const auto moe = [](std::vector<M> m) { return graphed_layer_units(modules(std::move(m)), true); };
  EXPECT_EQ(dense({}), (std::vector<U>{U::kWholeLayer}));
  EXPECT_EQ(moe({}), (std::vector<U>{U::kWholeLayer}));
  EXPECT_EQ(dense({M::kAttn}), (std::vector<U>{U::kAttention}));
  EXPECT_EQ(dense({M::kMlp}), (std::vector<U>{U::kMlp}));
  EXPECT_EQ(dense({M::kAttn, M::kMlp}), (std::vector<U>{U::kAttention, U::kMlp}));
  EXPECT_EQ(moe({M::kAttn}), (std::vector<U>{U::kAttention}));
  EXPECT_EQ(moe({M::kAttn, M::kMoe}), (std::vector<U>{U::kAttention, U::kMoe}));
  EXPECT_EQ(moe({M::kMoeRouter}), (std::vector<U>{U::kMoeRouter}));
  EXPECT_EQ(moe({M::kAttn, M::kMoeRouter, M::kMoePreprocess}),
            (std::vector<U>{U::kAttention, U::kMoeRouter, U::kMoePreprocess}));
  // Parts a layer lacks are skipped: MoE modules on a dense layer, mlp on an MoE layer.
  EXPECT_TRUE(dense({M::kMoeRouter, M::kMoePreprocess}).empty());
  EXPECT_EQ(dense({M::kAttn, M::kMoe}), (std::vector<U>{U::kAttention}));
  EXPECT_TRUE(moe({M::kMlp}).empty());
}

TEST(LayerGraphRoutingTest, ChainsOnlyWhereAUnitFeedsTheNext) {
  using U = LayerUnit;
  // Whole layers chain layer to layer.
  EXPECT_EQ(chained_layer_units({{0, U::kWholeLayer}, {1, U::kWholeLayer}, {2, U::kWholeLayer}}),
            (std::vector<bool>{false, true, true}));
  // attn + mlp: attention feeds the MLP, the MLP ends the layer and feeds the next attention.
  EXPECT_EQ(chained_layer_units({{0, U::kAttention}, {0, U::kMlp}, {1, U::kAttention}, {1, U::kMlp}}),
            (std::vector<bool>{false, true, true, true}));
  // attn only: the eager MLP sits between two attention units; mlp only: eager attention between.
  EXPECT_EQ(chained_layer_units({{0, U::kAttention}, {1, U::kAttention}}), (std::vector<bool>{false, false}));
  EXPECT_EQ(chained_layer_units({{0, U::kMlp}, {1, U::kMlp}}), (std::vector<bool>{false, false}));
  // MoE: attention feeds moe or the router; the router's outputs are not the preprocess inputs'
  // first tensor, and the preprocess plan does not end the layer.
  EXPECT_EQ(chained_layer_units({{0, U::kAttention}, {0, U::kMoe}, {1, U::kAttention}, {1, U::kMoe}}),
            (std::vector<bool>{false, true, true, true}));
  EXPECT_EQ(chained_layer_units({{0, U::kAttention}, {0, U::kMoeRouter}, {0, U::kMoePreprocess}, {1, U::kAttention}}),
            (std::vector<bool>{false, true, false, false}));
  // A layer without graphed units breaks the chain.
  EXPECT_EQ(chained_layer_units({{0, U::kWholeLayer}, {2, U::kWholeLayer}}), (std::vector<bool>{false, false}));
}

TEST(LayerGraphRoutingTest, HelperCountsUnitsOverMixedLayers) {
  // Four layers, MoE every second one (--moe-layer-freq 2: layers 1 and 3 are MoE).
  const config::RunConfig run = graphed::testing::run_config(
      {{"num_layers", 4}, {"hidden_size", 32}, {"num_attention_heads", 2}, {"seq_length", 16}, {"vocab_size", 64},
       {"num_experts", 4}, {"moe_layer_freq", "2"}, {"moe_expert_capacity_factor", 1.0},
       {"moe_pad_expert_input_to_capacity", true}});
  model::GptModel model(run.model, run.moe_layers);
  using M = CudaGraphModule;
  EXPECT_EQ(LayerGraphHelper(model, modules({}), {}).unit_count(), 4);
  EXPECT_EQ(LayerGraphHelper(model, modules({M::kAttn}), {}).unit_count(), 4);
  EXPECT_EQ(LayerGraphHelper(model, modules({M::kAttn, M::kMlp}), {}).unit_count(), 6);            // 4 attn + 2 dense MLPs
  EXPECT_EQ(LayerGraphHelper(model, modules({M::kMoeRouter, M::kMoePreprocess}), {}).unit_count(), 4);  // 2 MoE x 2
  EXPECT_EQ(LayerGraphHelper(model, modules({M::kAttn, M::kMoe}), {}).unit_count(), 6);
  EXPECT_FALSE(LayerGraphHelper(model, modules({M::kAttn}), {}).is_captured());
}

TEST(LayerGraphRoutingTest, SampleBuffersPerUnitDoNotGrowWithCapturedMicrobatches) {
  // The helper walks the PP = 1 schedule (forward, backward, forward, ...): every slot of a unit
  // reuses the same static inputs, so unique buffers = units, for any number of captured slots.
  for (const int64_t units : {1, 3, 8}) {
    for (const int64_t slots : {1, 2, 4, 8}) {
      capture::PipelineRank rank;
      rank.microbatches = slots;
      const auto order = capture::convert_schedule_table_to_order(capture::warmup_microbatches(rank), 1,
                                                                  capture::schedule_table(slots, 1, 1));
      std::vector<int64_t> signatures(static_cast<std::size_t>(units));
      for (int64_t u = 0; u < units; ++u) signatures[static_cast<std::size_t>(u)] = u;  // all different
      const capture::SampleBufferPlan plan = capture::plan_sample_buffers(order, {units}, slots, {signatures});
      EXPECT_EQ(plan.unique_buffers, units) << units << " units, " << slots << " slots";
      EXPECT_EQ(static_cast<int64_t>(plan.buffer_of_entry.size()), units * slots);
    }
  }
}

TEST(LayerGraphRoutingTest, TrainerOnTheCpuRefusesTheImpl) {
  const config::RunConfig run = graphed::testing::run_config(
      {{"num_layers", 2}, {"hidden_size", 32}, {"num_attention_heads", 2}, {"seq_length", 16}, {"vocab_size", 64},
       {"mock_data", true}, {"cuda_graph_impl", "transformer_engine"}});
  EXPECT_EQ(graphed::testing::error_text<ConfigError>([&] {
              Trainer trainer(run, TokenDataset::open(run.train, run.model, "", 0), at::Device(at::kCPU));
            }),
            "--cuda-graph-impl transformer_engine needs a CUDA device, but the trainer was given cpu; fix: "
            "--cuda-graph-impl none, or train on a GPU");
}

}  // namespace
}  // namespace graphed::train
