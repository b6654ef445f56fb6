// tests/train/layer_graph_helper_test.cpp — how many units the transformer_engine helper graphs for a
// model, and that its PP = 1 schedule needs one sample buffer set per unit whatever the number of
// captured microbatches. The capture itself runs on the GPU (layer_graphs_cuda_test.cpp); the CPU
// trainer refuses the impl with a clear error. Unit selection: graph_targets_test.cpp.
#include "graphed/train/layer_graph_helper.h"

#include <gtest/gtest.h>

#include "error_text.h"
#include "graph_support_for_test.h"
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

TEST(LayerGraphRoutingTest, HelperCountsUnitsOverMixedLayers) {
  // Four layers, MoE every second one (--moe-layer-freq 2: layers 1 and 3 are MoE), plus the two stage
  // units (embedding, loss) unless they are turned off.
  const config::RunConfig run = graphed::testing::run_config({{"num_layers", 4},
                                                              {"hidden_size", 32},
                                                              {"num_attention_heads", 2},
                                                              {"seq_length", 16},
                                                              {"vocab_size", 64},
                                                              {"num_experts", 4},
                                                              {"moe_layer_freq", "2"},
                                                              {"moe_expert_capacity_factor", 1.0},
                                                              {"moe_pad_expert_input_to_capacity", true}});
  model::GptModel model(run.model, run.moe_layers);
  using M = CudaGraphModule;
  const auto without_stages = [](config::CudaGraphConfig config) {
    config.stage_units = false;
    return config;
  };
  EXPECT_EQ(LayerGraphHelper(model, modules({}), {}).unit_count(), 2 + 4);
  EXPECT_EQ(LayerGraphHelper(model, without_stages(modules({})), {}).unit_count(), 4);
  EXPECT_EQ(LayerGraphHelper(model, without_stages(modules({M::kAttn})), {}).unit_count(), 4);
  EXPECT_EQ(LayerGraphHelper(model, without_stages(modules({M::kAttn, M::kMlp})), {}).unit_count(),
            6);  // 4 attn + 2 dense MLPs
  EXPECT_EQ(LayerGraphHelper(model, without_stages(modules({M::kMoeRouter, M::kMoePreprocess})), {}).unit_count(), 4);
  EXPECT_EQ(LayerGraphHelper(model, modules({M::kAttn, M::kMoe}), {}).unit_count(), 2 + 6);
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
  const config::RunConfig run = graphed::testing::run_config({{"num_layers", 2},
                                                              {"hidden_size", 32},
                                                              {"num_attention_heads", 2},
                                                              {"seq_length", 16},
                                                              {"vocab_size", 64},
                                                              {"mock_data", true},
                                                              {"cuda_graph_impl", "transformer_engine"}});
  EXPECT_EQ(graphed::testing::error_text<ConfigError>(
                [&] { Trainer trainer(run, TokenDataset::open(run.train, run.model, "", 0), at::Device(at::kCPU)); }),
            "--cuda-graph-impl transformer_engine needs CUDA graphs, but " + graphed::testing::why_no_graphs_on_cpu() +
                "; fix: --cuda-graph-impl none, or train on a GPU");
}

}  // namespace
}  // namespace graphed::train
