// tests/train/graph_targets_test.cpp — which units the per-layer implementations graph: how
// --cuda-graph-modules routes to a layer's units (research megatron-cudagraphs.md §1.11), the stage
// units around the layers, and which units chain their buffers (one unit's output 0 is the next one's
// argument 0).
#include "graphed/train/graph_targets.h"

#include <gtest/gtest.h>

#include "run_config_for_test.h"

namespace graphed::train {
namespace {

using config::CudaGraphModule;
using model::LayerUnit;

config::CudaGraphConfig modules(std::vector<CudaGraphModule> selected, bool stage_units = true) {
  config::CudaGraphConfig config;
  config.impl = config::CudaGraphImpl::kLocal;
  config.modules = std::move(selected);
  config.stage_units = stage_units;
  return config;
}

TEST(GraphTargetsTest, ModulesSelectUnitsPerLayerKind) {
  using M = CudaGraphModule;
  using U = LayerUnit;
  const auto dense = [](std::vector<M> m) {
    return graphed_layer_units(modules(std::move(m)), model::transformer_parts(false));
  };
  const auto moe = [](std::vector<M> m) {
    return graphed_layer_units(modules(std::move(m)), model::transformer_parts(true));
  };
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
  EXPECT_TRUE(dense({M::kMamba}).empty());
}

TEST(GraphTargetsTest, HybridLayersGraphTheirOnePart) {
  using M = CudaGraphModule;
  using U = LayerUnit;
  const auto units = [](char symbol, std::vector<M> m) {
    return graphed_layer_units(modules(std::move(m)), model::hybrid_parts(symbol));
  };
  EXPECT_EQ(units('M', {}), (std::vector<U>{U::kWholeLayer}));
  EXPECT_EQ(units('M', {M::kMamba}), (std::vector<U>{U::kMamba}));
  EXPECT_TRUE(units('M', {M::kAttn}).empty());
  EXPECT_EQ(units('*', {M::kAttn, M::kMamba}), (std::vector<U>{U::kAttention}));
  EXPECT_TRUE(units('*', {M::kMamba}).empty());
  EXPECT_EQ(units('-', {M::kAttn, M::kMlp}), (std::vector<U>{U::kMlp}));
  EXPECT_EQ(units('E', {M::kAttn, M::kMamba, M::kMoeRouter, M::kMoePreprocess}),
            (std::vector<U>{U::kMoeRouter, U::kMoePreprocess}));
}

TEST(GraphTargetsTest, HybridLayersChainThroughTheirOnePart) {
  using U = LayerUnit;
  const auto target = [](int64_t layer, LayerUnit unit, char symbol) {
    return GraphTarget{TargetKind::kLayer, layer, unit, {}, model::hybrid_parts(symbol)};
  };
  // M * - with mamba, attn and mlp: each unit is its whole layer, so each feeds the next.
  EXPECT_EQ(chained_targets({target(0, U::kMamba, 'M'), target(1, U::kAttention, '*'), target(2, U::kMlp, '-')}),
            (std::vector<bool>{false, true, true}));
  // An E layer opens with its router; its eager experts end it, so the next layer is not chained.
  EXPECT_EQ(chained_targets({target(0, U::kMamba, 'M'), target(1, U::kMoeRouter, 'E'),
                             target(1, U::kMoePreprocess, 'E'), target(2, U::kMamba, 'M')}),
            (std::vector<bool>{false, true, false, false}));
}

/// Targets described by (kind, layer, unit), for the chaining rule; the units themselves are not needed.
std::vector<GraphTarget> described(const std::vector<std::tuple<TargetKind, int64_t, LayerUnit>>& items) {
  std::vector<GraphTarget> targets;
  for (const auto& [kind, layer, unit] : items) targets.push_back({kind, layer, unit, {}});
  return targets;
}

std::vector<bool> chained_layers(const std::vector<std::pair<int64_t, LayerUnit>>& layers) {
  std::vector<std::tuple<TargetKind, int64_t, LayerUnit>> items;
  for (const auto& [layer, unit] : layers) items.emplace_back(TargetKind::kLayer, layer, unit);
  return chained_targets(described(items));
}

TEST(GraphTargetsTest, ChainsOnlyWhereAUnitFeedsTheNext) {
  using U = LayerUnit;
  // Whole layers chain layer to layer.
  EXPECT_EQ(chained_layers({{0, U::kWholeLayer}, {1, U::kWholeLayer}, {2, U::kWholeLayer}}),
            (std::vector<bool>{false, true, true}));
  // attn + mlp: attention feeds the MLP, the MLP ends the layer and feeds the next attention.
  EXPECT_EQ(chained_layers({{0, U::kAttention}, {0, U::kMlp}, {1, U::kAttention}, {1, U::kMlp}}),
            (std::vector<bool>{false, true, true, true}));
  // attn only: the eager MLP sits between two attention units; mlp only: eager attention between.
  EXPECT_EQ(chained_layers({{0, U::kAttention}, {1, U::kAttention}}), (std::vector<bool>{false, false}));
  EXPECT_EQ(chained_layers({{0, U::kMlp}, {1, U::kMlp}}), (std::vector<bool>{false, false}));
  // MoE: attention feeds moe or the router; the router's outputs are not the preprocess inputs'
  // first tensor, and the preprocess plan does not end the layer.
  EXPECT_EQ(chained_layers({{0, U::kAttention}, {0, U::kMoe}, {1, U::kAttention}, {1, U::kMoe}}),
            (std::vector<bool>{false, true, true, true}));
  EXPECT_EQ(chained_layers({{0, U::kAttention}, {0, U::kMoeRouter}, {0, U::kMoePreprocess}, {1, U::kAttention}}),
            (std::vector<bool>{false, true, false, false}));
  // A layer without graphed units breaks the chain.
  EXPECT_EQ(chained_layers({{0, U::kWholeLayer}, {2, U::kWholeLayer}}), (std::vector<bool>{false, false}));
}

TEST(GraphTargetsTest, StageUnitsChainToTheLayersThatTouchThem) {
  using U = LayerUnit;
  using K = TargetKind;
  // The embedding feeds layer 0's whole layer; the last whole layer feeds the loss.
  EXPECT_EQ(chained_targets(described({{K::kEmbedding, -1, U::kWholeLayer},
                                       {K::kLayer, 0, U::kWholeLayer},
                                       {K::kLayer, 1, U::kWholeLayer},
                                       {K::kLoss, 2, U::kWholeLayer}})),
            (std::vector<bool>{false, true, true, true}));
  // attn only: the embedding feeds the first attention, but the last layer's MLP is eager.
  EXPECT_EQ(chained_targets(described(
                {{K::kEmbedding, -1, U::kWholeLayer}, {K::kLayer, 0, U::kAttention}, {K::kLoss, 1, U::kWholeLayer}})),
            (std::vector<bool>{false, true, false}));
  // mlp only: eager attention after the embedding; the last MLP feeds the loss.
  EXPECT_EQ(chained_targets(described(
                {{K::kEmbedding, -1, U::kWholeLayer}, {K::kLayer, 0, U::kMlp}, {K::kLoss, 1, U::kWholeLayer}})),
            (std::vector<bool>{false, false, true}));
}

TEST(GraphTargetsTest, ModelTargetsInForwardOrderWithStageUnits) {
  const config::RunConfig run = graphed::testing::run_config(
      {{"num_layers", 2}, {"hidden_size", 32}, {"num_attention_heads", 2}, {"seq_length", 16}, {"vocab_size", 64}});
  model::GptModel model(run.model, run.moe_layers);
  std::vector<std::string> names;
  for (const GraphTarget& target : graph_targets(model, modules({CudaGraphModule::kAttn, CudaGraphModule::kMlp}))) {
    names.push_back(target.unit.name);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"embedding", "layers.0.attention", "layers.0.mlp", "layers.1.attention",
                                             "layers.1.mlp", "loss"}));
  EXPECT_EQ(graph_targets(model, modules({}, /*stage_units=*/false)).size(), 2u);
  // The tied output layer reads the word embeddings, as the embedding does.
  const auto targets = graph_targets(model, modules({}));
  EXPECT_EQ(targets.front().unit.parameter_names, (std::vector<std::string>{"word_embeddings", "position_embeddings"}));
  EXPECT_EQ(targets.back().unit.parameter_names,
            (std::vector<std::string>{"final_norm.weight", "final_norm.bias", "word_embeddings"}));
  EXPECT_EQ(targets.back().unit.input_names, (std::vector<std::string>{"hidden", "labels"}));
}

TEST(GraphTargetsTest, InstalledRunnersAreCalledAndEagerOnesComeBack) {
  const config::RunConfig run = graphed::testing::run_config({{"num_layers", 1},
                                                              {"hidden_size", 16},
                                                              {"num_attention_heads", 2},
                                                              {"seq_length", 8},
                                                              {"vocab_size", 32},
                                                              {"attention_dropout", 0.0},
                                                              {"hidden_dropout", 0.0}});
  model::GptModel model(run.model, run.moe_layers);
  const at::Tensor tokens = at::randint(32, {2, 8}, at::kLong);
  const at::Tensor reference = model->forward(tokens, tokens, 0).loss;
  struct Counting : capture::UnitRunner {
    explicit Counting(capture::GraphableUnit u) : unit_(std::move(u)) {}
    std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs, int64_t microbatch) override {
      microbatches.push_back(microbatch);
      return unit_.forward(inputs);
    }
    const capture::GraphableUnit& unit() const override { return unit_; }
    capture::GraphableUnit unit_;
    std::vector<int64_t> microbatches;
  };
  const auto targets = graph_targets(model, modules({}));
  std::vector<std::shared_ptr<Counting>> runners;
  for (const GraphTarget& target : targets) {
    runners.push_back(std::make_shared<Counting>(target.unit));
    install_runner(model, target, runners.back());
  }
  EXPECT_TRUE(at::equal(model->forward(tokens, tokens, 3).loss, reference));
  for (const auto& runner : runners) EXPECT_EQ(runner->microbatches, (std::vector<int64_t>{3})) << runner->unit().name;
  for (const GraphTarget& target : targets) install_eager_runner(model, target);
  model->forward(tokens, tokens, 0);
  for (const auto& runner : runners)
    EXPECT_EQ(runner->microbatches.size(), 1u) << "not called after the eager one is back";
}

}  // namespace
}  // namespace graphed::train
