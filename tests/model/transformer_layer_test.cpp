// tests/model/transformer_layer_test.cpp — the layer's units: composing them equals the whole-layer
// unit, every unit is reachable through a runner, and swapping runners is invisible to the output; the
// layer's parts register their modules under the layer's own names, in the layer's order.
#include "graphed/model/transformer_layer.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "graphed/model/gpt_model.h"
#include "run_config_for_test.h"

namespace graphed::model {
namespace {

/// Counts calls, then runs the unit eagerly.
class CountingRunner : public capture::UnitRunner {
 public:
  explicit CountingRunner(capture::GraphableUnit unit) : unit_(std::move(unit)) {}
  std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs, int64_t /*microbatch*/) override {
    ++calls;
    return unit_.forward(inputs);
  }
  const capture::GraphableUnit& unit() const override { return unit_; }
  int calls = 0;

 private:
  capture::GraphableUnit unit_;
};

config::RunConfig moe_config(bool drop_and_pad) {
  nlohmann::json s{{"num_layers", 2},          {"hidden_size", 16},     {"num_attention_heads", 2},
                   {"seq_length", 8},          {"num_experts", 4},      {"moe_shared_expert_intermediate_size", 8},
                   {"attention_dropout", 0.0}, {"hidden_dropout", 0.0}, {"moe_layer_freq", "0,1"}};
  if (drop_and_pad) s.update({{"moe_expert_capacity_factor", 1.0}, {"moe_pad_expert_input_to_capacity", true}});
  return graphed::testing::run_config(s);
}

TEST(TransformerLayerTest, UnitsComposeToTheWholeLayer) {
  for (const bool padded : {false, true}) {
    at::manual_seed(11);
    const config::RunConfig config = moe_config(padded);
    for (int64_t layer_index = 0; layer_index < 2; ++layer_index) {
      TransformerLayer layer(config.model, layer_index + 1, config.moe_layers[static_cast<std::size_t>(layer_index)]);
      const at::Tensor x = at::randn({2, 8, 16});
      const auto composed = layer->forward(x, 0);
      const auto whole = layer->unit(LayerUnit::kWholeLayer).forward({x});
      EXPECT_TRUE(at::equal(composed.first, whole[0])) << "layer " << layer_index << " padded " << padded;
      if (composed.second.defined()) {
        EXPECT_TRUE(at::equal(composed.second, whole[1]));
      } else {
        EXPECT_FALSE(layer->is_moe()) << "only dense layers skip the aux loss";
        EXPECT_EQ(whole.size(), 1u) << "a dense layer's whole-layer unit returns the hidden states only";
      }
    }
  }
}

TEST(TransformerLayerTest, RunnersAreCalledAndCanBeSwapped) {
  at::manual_seed(12);
  const config::RunConfig config = moe_config(true);
  TransformerLayer layer(config.model, 2, true);
  EXPECT_TRUE(layer->is_moe());
  EXPECT_FALSE(layer->has_unit(LayerUnit::kMlp));
  const at::Tensor x = at::randn({2, 8, 16});
  const auto reference = layer->forward(x, 0);

  auto attention = std::make_shared<CountingRunner>(layer->unit(LayerUnit::kAttention));
  auto router = std::make_shared<CountingRunner>(layer->unit(LayerUnit::kMoeRouter));
  auto preprocess = std::make_shared<CountingRunner>(layer->unit(LayerUnit::kMoePreprocess));
  layer->set_runner(LayerUnit::kAttention, attention);
  layer->set_runner(LayerUnit::kMoeRouter, router);
  layer->set_runner(LayerUnit::kMoePreprocess, preprocess);
  const auto partial = layer->forward(x, 0);
  EXPECT_EQ(attention->calls, 1);
  EXPECT_EQ(router->calls, 1);
  EXPECT_EQ(preprocess->calls, 1);
  EXPECT_TRUE(at::equal(partial.first, reference.first));
  EXPECT_EQ(router->unit().name, "layers.1.moe_router");
  EXPECT_EQ(router->run({x}, 0).size(), 5u) << "tokens, weights, indices, aux loss, shared expert";

  auto moe = std::make_shared<CountingRunner>(layer->unit(LayerUnit::kMoe));
  layer->set_runner(LayerUnit::kMoe, moe);
  const auto whole_moe = layer->forward(x, 0);
  EXPECT_EQ(moe->calls, 1);
  EXPECT_EQ(router->calls, 2) << "a kMoe runner replaces the router/preprocess composition";
  EXPECT_TRUE(at::equal(whole_moe.first, reference.first));

  auto whole = std::make_shared<CountingRunner>(layer->unit(LayerUnit::kWholeLayer));
  layer->set_runner(LayerUnit::kWholeLayer, whole);
  EXPECT_TRUE(at::equal(layer->forward(x, 0).first, reference.first));
  EXPECT_EQ(whole->calls, 1);
  EXPECT_EQ(attention->calls, 2) << "the whole-layer unit calls the parts directly, not their runners";
}

TEST(TransformerLayerTest, UnitParametersCoverTheLayer) {
  const config::RunConfig config = moe_config(true);
  TransformerLayer layer(config.model, 1, false);
  const auto whole = layer->unit(LayerUnit::kWholeLayer).parameters.size();
  const auto parts =
      layer->unit(LayerUnit::kAttention).parameters.size() + layer->unit(LayerUnit::kMlp).parameters.size();
  EXPECT_EQ(whole, parts);
  EXPECT_EQ(whole, layer->parameters().size());
}

/// The modules the layer's parameters belong to (their names' first part), each once, in order.
std::vector<std::string> layer_parameter_modules(const torch::nn::Module& layer) {
  std::vector<std::string> modules;
  for (const auto& item : layer.named_parameters()) {
    const std::string module = item.key().substr(0, item.key().find('.'));
    if (modules.empty() || modules.back() != module) modules.push_back(module);
  }
  return modules;
}

bool parameter_name_starts_with(const std::string& text, const std::string& prefix) {
  return text.rfind(prefix, 0) == 0;
}

TEST(TransformerLayerTest, PartsRegisterTheirModulesUnderTheLayersNames) {
  const config::RunConfig config = moe_config(true);
  TransformerLayer dense(config.model, 1, false);
  EXPECT_EQ(layer_parameter_modules(*dense), (std::vector<std::string>{"input_norm", "attention", "mlp_norm", "mlp"}));
  TransformerLayer moe(config.model, 2, true);
  EXPECT_EQ(layer_parameter_modules(*moe), (std::vector<std::string>{"input_norm", "attention", "mlp_norm", "moe"}));
  const auto names = moe->named_parameters();
  for (const char* name : {"input_norm.weight", "attention.qkv_weight", "mlp_norm.weight", "moe.router_weight",
                           "moe.experts_w1", "moe.shared_expert.fc1_weight"}) {
    EXPECT_NE(names.find(name), nullptr) << name;
  }
  // The whole-layer unit lists every parameter, in the layer's order, under the model's names.
  const capture::GraphableUnit whole = moe->unit(LayerUnit::kWholeLayer);
  ASSERT_EQ(whole.parameter_names.size(), names.size());
  for (std::size_t i = 0; i < names.size(); ++i) EXPECT_EQ(whole.parameter_names[i], "layers.1." + names[i].key());
  // The router reads the norm, the router's weight and the shared expert, nothing else.
  const capture::GraphableUnit router = moe->unit(LayerUnit::kMoeRouter);
  std::size_t expected = 1;  // router_weight
  for (const auto& item : names) {
    const std::string& name = item.key();
    if (parameter_name_starts_with(name, "mlp_norm.") || parameter_name_starts_with(name, "moe.shared_expert.")) {
      ++expected;
    }
  }
  EXPECT_EQ(router.parameter_names.size(), expected);
  for (const std::string& name : router.parameter_names) {
    EXPECT_TRUE(parameter_name_starts_with(name, "layers.1.mlp_norm.") || name == "layers.1.moe.router_weight" ||
                parameter_name_starts_with(name, "layers.1.moe.shared_expert."))
        << name;
  }
  EXPECT_TRUE(moe->unit(LayerUnit::kMoePreprocess).parameters.empty());
}

TEST(GptModelTest, TiedAndUntiedOutputLayer) {
  const config::RunConfig tied = graphed::testing::run_config({{"hidden_size", 16}});
  const config::RunConfig untied =
      graphed::testing::run_config({{"hidden_size", 16}, {"untie_embeddings_and_output_weights", true}});
  GptModel a(tied.model, tied.moe_layers);
  GptModel b(untied.model, untied.moe_layers);
  EXPECT_EQ(a->named_parameters().find("output_weight"), nullptr);
  EXPECT_NE(b->named_parameters().find("output_weight"), nullptr);
  const at::Tensor tokens = at::randint(1024, {2, 8}, at::kLong);
  const auto out = a->forward(tokens, tokens, 0);
  EXPECT_NEAR(out.lm_loss.item<double>(), std::log(1024.0), 0.5) << "an untrained model is near uniform";
  EXPECT_EQ(a->generate({1, 2, 3}, 5).size(), 8u);
}

TEST(GptModelTest, SamplingRepeatsForASeedAndLeavesTrainingsRandomStateAlone) {
  const config::RunConfig config = graphed::testing::run_config({{"hidden_size", 16}});
  GptModel model(config.model, config.moe_layers);
  Sampling sampling;
  sampling.temperature = 1.0;
  sampling.top_k = 50;
  sampling.seed = 3;
  at::manual_seed(11);
  const at::Tensor before = at::rand({4});
  at::manual_seed(11);
  const auto first = model->generate({1, 2, 3}, 20, sampling);
  const at::Tensor after = at::rand({4});
  EXPECT_TRUE(before.equal(after)) << "sampling drew from the default generator";
  EXPECT_EQ(model->generate({1, 2, 3}, 20, sampling), first);
  sampling.seed = 4;
  EXPECT_NE(model->generate({1, 2, 3}, 20, sampling), first) << "another seed, another text";
  sampling.temperature = 1e-40;  // as good as greedy, and no overflow on the way
  EXPECT_EQ(model->generate({1, 2, 3}, 8, sampling), model->generate({1, 2, 3}, 8));
  Sampling greedy;  // temperature 0: argmax, whatever the seed
  greedy.seed = 9;
  EXPECT_EQ(model->generate({1, 2, 3}, 8, greedy), model->generate({1, 2, 3}, 8));
}

TEST(GptModelTest, SamplingNeverDrawsIdsPastTheTokenizersVocabulary) {
  // A byte-level run's table has --vocab-size rows (1024) and its tokenizer 256 ids: the padded rows
  // are made the likeliest here, and still no sample, greedy or hot, holds one of them.
  const config::RunConfig config = graphed::testing::run_config({{"hidden_size", 16}});
  GptModel model(config.model, config.moe_layers);
  {
    at::NoGradGuard no_grad;
    model->named_parameters()["word_embeddings"].narrow(0, 256, 768).mul_(50.0);
  }
  ASSERT_GE(model->generate({1, 2, 3}, 1).back(), 256) << "the padded ids must be the likeliest for this test";
  Sampling sampling;
  sampling.vocabulary = 256;
  for (const double temperature : {0.0, 1.0, 1.5}) {
    sampling.temperature = temperature;
    for (uint64_t seed = 0; seed < 5; ++seed) {
      sampling.seed = seed;
      const auto tokens = model->generate({1, 2, 3}, 16, sampling);
      for (const int64_t id : tokens) EXPECT_LT(id, 256) << "temperature " << temperature << ", seed " << seed;
    }
  }
}

}  // namespace
}  // namespace graphed::model
