// tests/model/moe_cuda_test.cpp — on a GPU under bf16 autocast, where the router's logits are bf16: the
// load-balancing loss sums the expert counts and the probability masses in float32, so 601 tokens of one expert
// count 601 (bf16 holds 600 or 602) and the loss follows the Switch formula to float32's rounding.
#include "graphed/model/moe.h"

#include <gtest/gtest.h>

#include "cuda_test.h"
#include "graphed/util/compat.h"

namespace graphed::model {
namespace {

using MoeCudaTest = graphed::testing::CudaTest;

TEST_F(MoeCudaTest, TheAuxLossSumsInFloat32UnderAutocast) {
  MoeShape shape;
  shape.hidden_size = 16;
  shape.num_experts = 4;
  shape.top_k = 1;
  shape.expert_ffn_hidden_size = 24;
  shape.aux_loss_coeff = 0.01;
  at::manual_seed(5);
  Moe moe(shape);
  moe->to(at::kCUDA);
  {
    at::NoGradGuard no_grad;
    at::Tensor router = moe->named_parameters()["router_weight"];
    router.zero_();
    router[0].fill_(1.0);  // positive tokens all prefer expert 0
  }
  const int64_t tokens = 601;
  const at::Tensor x = at::rand({tokens, 16}, at::TensorOptions().device(at::kCUDA)) + 0.1;
  Routing routing;
  at::Tensor logits, probabilities;
  {
    const compat::AutocastScope autocast(true);
    routing = moe->route(x);
    logits = at::linear(x, moe->named_parameters()["router_weight"]);
    probabilities = at::softmax(logits, -1);  // float32: autocast's softmax
  }
  ASSERT_EQ(logits.scalar_type(), at::kBFloat16) << "the routing this test is about: bf16 logits under autocast";
  EXPECT_EQ(routing.aux_loss.scalar_type(), at::kFloat);
  ASSERT_EQ(routing.indices.eq(0).sum().item<int64_t>(), tokens);
  const double mass = probabilities.select(1, 0).to(at::kDouble).sum().item<double>();
  const double expected = mass * static_cast<double>(tokens) * 4 * 0.01 / static_cast<double>(tokens * tokens);
  EXPECT_NEAR(routing.aux_loss.item<double>(), expected, 1e-6 * expected);
}

}  // namespace
}  // namespace graphed::model
