// tests/model/hybrid_model_test.cpp — a Mamba-hybrid model built from its pattern: each layer holds the
// part its symbol names (M Mamba, * attention, - MLP, E MoE) and offers those units; composing a layer's
// units through runners equals its whole-layer unit; the model trains (every parameter gets a gradient)
// and its loss falls on a repeated batch.
#include <gtest/gtest.h>

#include <torch/optim/adam.h>

#include "graphed/model/gpt_model.h"
#include "run_config_for_test.h"

namespace graphed::model {
namespace {

config::RunConfig hybrid_config() {
  return graphed::testing::run_config({{"num_layers", 4},
                                       {"hidden_size", 32},
                                       {"num_attention_heads", 2},
                                       {"seq_length", 12},
                                       {"vocab_size", 64},
                                       {"hybrid_override_pattern", "M*-E"},
                                       {"mamba_state_dim", 8},
                                       {"mamba_head_dim", 16},
                                       {"mamba_num_groups", 2},
                                       {"mamba_chunk_size", 4},
                                       {"num_experts", 4},
                                       {"moe_expert_capacity_factor", 2.0},
                                       {"moe_pad_expert_input_to_capacity", true},
                                       {"attention_dropout", 0.0},
                                       {"hidden_dropout", 0.0}});
}

TEST(HybridModelTest, EachLayerHoldsThePartItsSymbolNames) {
  const config::RunConfig config = hybrid_config();
  EXPECT_EQ(config.moe_layers, (std::vector<bool>{false, false, false, true}));
  GptModel model(config.model, config.moe_layers);
  const auto units_of = [&](int64_t i) {
    std::vector<LayerUnit> units;
    for (std::size_t u = 0; u < kLayerUnitCount; ++u) {
      const auto unit = static_cast<LayerUnit>(u);
      if (model->layers()[static_cast<std::size_t>(i)]->has_unit(unit)) units.push_back(unit);
    }
    return units;
  };
  using U = LayerUnit;
  EXPECT_EQ(units_of(0), (std::vector<U>{U::kWholeLayer, U::kMamba}));
  EXPECT_EQ(units_of(1), (std::vector<U>{U::kWholeLayer, U::kAttention}));
  EXPECT_EQ(units_of(2), (std::vector<U>{U::kWholeLayer, U::kMlp}));
  EXPECT_EQ(units_of(3), (std::vector<U>{U::kWholeLayer, U::kMoe, U::kMoeRouter, U::kMoePreprocess}));
  EXPECT_EQ(model->layers()[0]->unit(U::kMamba).name, "layers.0.mamba");
  // The Mamba unit is the whole M layer: the same parameters.
  EXPECT_EQ(model->layers()[0]->unit(U::kMamba).parameter_names,
            model->layers()[0]->unit(U::kWholeLayer).parameter_names);
}

TEST(HybridModelTest, UnitsComposeToTheWholeLayer) {
  at::manual_seed(4);
  const config::RunConfig config = hybrid_config();
  GptModel model(config.model, config.moe_layers);
  at::Tensor x = at::randn({2, 12, 32});
  for (auto& layer : model->layers()) {
    const auto composed = layer->forward(x, 0);
    const auto whole = layer->unit(LayerUnit::kWholeLayer).forward({x});
    EXPECT_TRUE(at::equal(composed.first, whole[0]));
    EXPECT_EQ(composed.second.defined(), layer->is_moe());
    x = composed.first.detach();
  }
}

TEST(HybridModelTest, TrainsEveryParameterAndLearnsARepeatedBatch) {
  at::manual_seed(6);
  const config::RunConfig config = hybrid_config();
  GptModel model(config.model, config.moe_layers);
  const at::Tensor tokens = at::randint(64, {4, 12}, at::kLong);
  const at::Tensor labels = at::roll(tokens, -1, 1);
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(3e-3));
  double first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    optimizer.zero_grad();
    const GptOutput output = model->forward(tokens, labels, 0);
    output.loss.backward();
    if (step == 0) {
      for (const auto& item : model->named_parameters()) {
        EXPECT_TRUE(item.value().grad().defined() && item.value().grad().abs().sum().item<double>() > 0) << item.key();
      }
      first = output.lm_loss.item<double>();
    }
    last = output.lm_loss.item<double>();
    optimizer.step();
  }
  EXPECT_LT(last, 0.5 * first) << "first " << first << ", last " << last;
}

}  // namespace
}  // namespace graphed::model
