// tests/model/mlp_test.cpp — the MLP activations against their formulas: exact GELU (Megatron's
// default), the tanh approximation of --openai-gelu (GPT-2's gelu_new), and SwiGLU.
#include "graphed/model/mlp.h"

#include <cmath>

#include <gtest/gtest.h>

#include "graphed/model/gpt_model.h"
#include "run_config_for_test.h"

namespace graphed::model {
namespace {

TEST(MlpTest, OpenaiGeluIsTheTanhApproximation) {
  at::manual_seed(5);
  const at::Tensor x = at::randn({3, 40}, at::kDouble) * 4.0;
  // GPT-2's gelu_new (Hugging Face NewGELUActivation), written out.
  const at::Tensor tanh_gelu = 0.5 * x * (1.0 + at::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x.pow(3))));
  const at::Tensor exact = 0.5 * x * (1.0 + at::erf(x / std::sqrt(2.0)));
  EXPECT_TRUE(at::allclose(mlp_activation(x, false, true), tanh_gelu, 1e-12, 1e-12));
  EXPECT_TRUE(at::allclose(mlp_activation(x, false, false), exact, 1e-12, 1e-12));
  EXPECT_GT((tanh_gelu - exact).abs().max().item<double>(), 1e-4)
      << "the two GELUs differ, so the test tells them apart";
  const auto halves = x.chunk(2, -1);
  EXPECT_TRUE(at::allclose(mlp_activation(x, true, true), at::silu(halves[0]) * halves[1]))
      << "openai_gelu leaves SwiGLU alone";
}

TEST(MlpTest, OpenaiGeluReachesTheModelsMlp) {
  at::manual_seed(6);
  Mlp exact(MlpShape{8, 12, false, true, 0.5, 0.5});
  Mlp approximate(MlpShape{8, 12, false, true, 0.5, 0.5, /*openai_gelu=*/true});
  approximate->named_parameters()["fc1_weight"].detach().copy_(exact->named_parameters()["fc1_weight"]);
  approximate->named_parameters()["fc2_weight"].detach().copy_(exact->named_parameters()["fc2_weight"]);
  const at::Tensor x = at::randn({2, 8}) * 3.0;
  const auto& p = exact->named_parameters();
  const at::Tensor hidden = at::linear(x, p["fc1_weight"], p["fc1_bias"]);
  EXPECT_TRUE(
      at::allclose(approximate->forward(x), at::linear(at::gelu(hidden, "tanh"), p["fc2_weight"], p["fc2_bias"])));
  EXPECT_FALSE(at::allclose(approximate->forward(x), exact->forward(x)));

  const config::RunConfig config =
      graphed::testing::run_config({{"openai_gelu", true}, {"attention_dropout", 0.0}, {"hidden_dropout", 0.0}});
  at::manual_seed(7);
  GptModel with(config.model, config.moe_layers);
  const config::RunConfig off = graphed::testing::run_config({{"attention_dropout", 0.0}, {"hidden_dropout", 0.0}});
  at::manual_seed(7);
  GptModel without(off.model, off.moe_layers);
  const at::Tensor tokens = at::randint(0, 1024, {1, 16}, at::kLong);
  EXPECT_FALSE(at::allclose(with->logits(tokens), without->logits(tokens))) << "--openai-gelu changes the model";
}

}  // namespace
}  // namespace graphed::model
