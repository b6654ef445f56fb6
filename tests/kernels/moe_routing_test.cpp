// tests/kernels/moe_routing_test.cpp — the MoE routing ops on the CPU (their reference, kernels/moe_routing_ops.h)
// against formulas written out here in float64: the router's choices (ties to the lower expert), weights and sums;
// the stable sort plan; the gather into expert order and the weighted sum back, with gradients; each expert's bias
// with the activation, with gradients.
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <cmath>
#include <vector>

#include "graphed/kernels/moe_routing_ops.h"

namespace graphed::kernels {
namespace {

const auto kDouble = at::TensorOptions().dtype(at::kDouble);

TEST(MoeRoutingTest, RouteChoosesTheLargestLogitsAndSoftmaxesThem) {
  const at::Tensor logits = at::tensor({0.5, 2.0, -1.0, 2.0, 1.0, 0.0, 3.0, -2.0}, kDouble).view({2, 4});
  const RouteDecision decision = moe_route(logits, 2, /*pre_softmax=*/false);
  // Row 0 ties 2.0 at experts 1 and 3: the lower goes first.
  EXPECT_TRUE(at::equal(decision.indices, at::tensor({1, 3, 2, 0}, at::kLong).view({2, 2})));
  EXPECT_NEAR(decision.weights[0][0].item<double>(), 0.5, 1e-15);
  const double row1 = 1.0 / (1.0 + std::exp(1.0 - 3.0));
  EXPECT_NEAR(decision.weights[1][0].item<double>(), row1, 1e-15);
  EXPECT_NEAR(decision.weights[1][1].item<double>(), 1.0 - row1, 1e-15);
  EXPECT_TRUE(at::allclose(decision.mass, at::softmax(logits, -1).sum(0), 1e-15, 1e-15));
  EXPECT_TRUE(at::equal(decision.counts, at::tensor({1.0, 1.0, 1.0, 1.0}, kDouble)));
}

TEST(MoeRoutingTest, PreSoftmaxKeepsTheChosenProbabilities) {
  at::manual_seed(3);
  const at::Tensor logits = at::randn({6, 5}, kDouble);
  const at::Tensor probabilities = at::softmax(logits, -1);
  for (const int64_t k : {int64_t{1}, int64_t{3}, int64_t{5}}) {
    const RouteDecision decision = moe_route(logits, k, /*pre_softmax=*/true);
    const auto top = probabilities.topk(k, -1);
    EXPECT_TRUE(at::equal(decision.indices, std::get<1>(top))) << "k " << k;
    EXPECT_TRUE(at::allclose(decision.weights, std::get<0>(top), 1e-15, 1e-15)) << "k " << k;
    EXPECT_EQ(decision.counts.sum().item<double>(), static_cast<double>(6 * k));
  }
}

TEST(MoeRoutingTest, RouteEdgesNoTokensOneExpertEveryExpert) {
  const RouteDecision none = moe_route(at::zeros({0, 4}, kDouble), 2, false);
  EXPECT_EQ(none.indices.sizes(), (std::vector<int64_t>{0, 2}));
  EXPECT_TRUE(at::equal(none.mass, at::zeros({4}, kDouble)));
  EXPECT_TRUE(at::equal(none.counts, at::zeros({4}, kDouble)));
  const RouteDecision one = moe_route(at::randn({3, 1}, kDouble), 1, false);
  EXPECT_TRUE(at::equal(one.indices, at::zeros({3, 1}, at::kLong)));
  EXPECT_TRUE(at::equal(one.weights, at::ones({3, 1}, kDouble)));
  // Every expert chosen: the weights are the softmax over all of them, in the chosen order.
  const at::Tensor logits = at::randn({2, 5}, kDouble);
  const RouteDecision all = moe_route(logits, 5, false);
  EXPECT_TRUE(at::allclose(all.weights, at::softmax(logits, -1).gather(-1, all.indices), 1e-15, 1e-15));
  EXPECT_TRUE(at::equal(all.counts, at::full({5}, 2.0, kDouble)));
}

TEST(MoeRoutingTest, RouteGradientsFlowFromWeightsAndMass) {
  at::manual_seed(4);
  for (const bool pre_softmax : {false, true}) {
    const at::Tensor logits = at::randn({5, 6}, kDouble).requires_grad_(true);
    const at::Tensor upstream = at::randn({5, 2}, kDouble);
    const at::Tensor mass_upstream = at::randn({6}, kDouble);
    const RouteDecision decision = moe_route(logits, 2, pre_softmax);
    const at::Tensor got = torch::autograd::grad(
        {(decision.weights * upstream).sum() + (decision.mass * mass_upstream).sum()}, {logits})[0];
    // The same through the formulas, at the chosen experts.
    const at::Tensor probabilities = at::softmax(logits, -1);
    const at::Tensor chosen = logits.gather(-1, decision.indices);
    const at::Tensor weights = pre_softmax ? probabilities.gather(-1, decision.indices) : at::softmax(chosen, -1);
    const at::Tensor want =
        torch::autograd::grad({(weights * upstream).sum() + (probabilities.sum(0) * mass_upstream).sum()}, {logits})[0];
    EXPECT_TRUE(at::allclose(got, want, 1e-13, 1e-13)) << "pre_softmax " << pre_softmax;
  }
}

TEST(MoeRoutingTest, SwitchLossIsTheScaledDotOfMassAndCounts) {
  const at::Tensor mass = at::tensor({0.5, 1.5, 2.0}, kDouble).requires_grad_(true);
  const at::Tensor counts = at::tensor({2.0, 0.0, 4.0}, kDouble);
  const at::Tensor loss = switch_balance_loss(mass, counts, 0.25);
  EXPECT_DOUBLE_EQ(loss.item<double>(), 0.25 * (0.5 * 2.0 + 2.0 * 4.0));
  const at::Tensor gradient = torch::autograd::grad({loss * 2.0}, {mass})[0];
  EXPECT_TRUE(at::equal(gradient, at::tensor({1.0, 0.0, 2.0}, kDouble)));
}

TEST(MoeRoutingTest, SortPlanIsTheStableSortWithItsInverseAndOffsets) {
  at::manual_seed(5);
  for (const int64_t experts : {int64_t{1}, int64_t{4}, int64_t{9}}) {
    const at::Tensor experts_of = at::randint(0, experts == 9 ? 3 : experts, {37}, at::kLong);  // 9: six never used
    const SortPlan plan = moe_sort_plan(experts_of, experts);
    std::vector<int64_t> order;
    for (int64_t e = 0; e < experts; ++e) {
      for (int64_t a = 0; a < 37; ++a) {
        if (experts_of[a].item<int64_t>() == e) order.push_back(a);
      }
    }
    EXPECT_TRUE(at::equal(plan.order, at::tensor(order, at::kLong))) << experts << " experts";
    EXPECT_TRUE(at::equal(plan.destination.index_select(0, plan.order), at::arange(37, at::kLong)));
    EXPECT_TRUE(at::equal(plan.counts, at::bincount(experts_of, {}, experts)));
    EXPECT_TRUE(at::equal(plan.offsets, at::cat({at::zeros({1}, at::kLong), plan.counts.cumsum(0)})));
  }
}

TEST(MoeRoutingTest, SortPlanOfNoAssignments) {
  const SortPlan plan = moe_sort_plan(at::zeros({0}, at::kLong), 3);
  EXPECT_EQ(plan.order.numel(), 0);
  EXPECT_TRUE(at::equal(plan.counts, at::zeros({3}, at::kLong)));
  EXPECT_TRUE(at::equal(plan.offsets, at::zeros({4}, at::kLong)));
}

TEST(MoeRoutingTest, PermuteGathersTokensAndUnpermuteSumsThemWeighted) {
  at::manual_seed(6);
  const int64_t tokens = 5, k = 3, h = 4;
  const at::Tensor indices = at::randint(0, 4, {tokens, k}, at::kLong);
  const SortPlan plan = moe_sort_plan(indices, 4);
  const at::Tensor x = at::randn({tokens, h}, kDouble).requires_grad_(true);
  const at::Tensor sorted = moe_permute(x, plan.order, plan.destination, k, at::kDouble);
  for (int64_t r = 0; r < tokens * k; ++r) {
    EXPECT_TRUE(at::equal(sorted[r], x[plan.order[r].item<int64_t>() / k])) << "row " << r;
  }
  const at::Tensor expert_output = (sorted * 2.0 + 1.0).detach().requires_grad_(true);
  const at::Tensor weights = at::rand({tokens, k}, kDouble).requires_grad_(true);
  const at::Tensor out = moe_unpermute(expert_output, weights, plan.order, plan.destination);
  // Token t: sum over its choices of weight x its row's output.
  const at::Tensor per_choice = expert_output.index_select(0, plan.destination).view({tokens, k, h});
  const at::Tensor want = (per_choice * weights.unsqueeze(-1)).sum(1);
  EXPECT_TRUE(at::allclose(out, want, 1e-15, 1e-15));
  const at::Tensor upstream = at::randn({tokens, h}, kDouble);
  const auto got = torch::autograd::grad({(out * upstream).sum()}, {expert_output, weights});
  const auto wanted = torch::autograd::grad({(want * upstream).sum()}, {expert_output, weights});
  EXPECT_TRUE(at::allclose(got[0], wanted[0], 1e-15, 1e-15));
  EXPECT_TRUE(at::allclose(got[1], wanted[1], 1e-15, 1e-15));
  // The tokens' gradient sums each token's k rows.
  const at::Tensor sorted_upstream = at::randn({tokens * k, h}, kDouble);
  const at::Tensor grad_x = torch::autograd::grad({(sorted * sorted_upstream).sum()}, {x})[0];
  const at::Tensor by_choice = sorted_upstream.index_select(0, plan.destination).view({tokens, k, h}).sum(1);
  EXPECT_TRUE(at::allclose(grad_x, by_choice, 1e-15, 1e-15));
}

TEST(MoeRoutingTest, BiasActivationAddsEachExpertsBiasBeforeTheActivation) {
  at::manual_seed(7);
  const at::Tensor offsets = at::tensor({0, 3, 3, 7}, at::kLong);  // expert 1 has no rows
  const at::Tensor expert = at::tensor({0, 0, 0, 2, 2, 2, 2}, at::kLong);
  for (const ExpertActivation activation :
       {ExpertActivation::kNone, ExpertActivation::kGelu, ExpertActivation::kGeluTanh, ExpertActivation::kSwiglu}) {
    const at::Tensor hidden = at::randn({7, 6}, kDouble).requires_grad_(true);
    const at::Tensor bias = at::randn({3, 6}, kDouble).requires_grad_(true);
    const at::Tensor out = grouped_bias_activation(hidden, bias, offsets, activation, at::kDouble);
    const at::Tensor x = hidden + bias.index_select(0, expert);
    at::Tensor want;
    switch (activation) {
      case ExpertActivation::kNone: want = x; break;
      case ExpertActivation::kGelu: want = x * 0.5 * (1.0 + at::erf(x / std::sqrt(2.0))); break;
      case ExpertActivation::kGeluTanh:
        want = 0.5 * x * (1.0 + at::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x.pow(3))));
        break;
      case ExpertActivation::kSwiglu: {
        const at::Tensor gate = x.narrow(1, 0, 3);
        want = gate * at::sigmoid(gate) * x.narrow(1, 3, 3);
        break;
      }
    }
    EXPECT_TRUE(at::allclose(out, want, 1e-14, 1e-14)) << static_cast<int>(activation);
    const at::Tensor upstream = at::randn_like(want);
    const auto got = torch::autograd::grad({(out * upstream).sum()}, {hidden, bias});
    const auto wanted = torch::autograd::grad({(want * upstream).sum()}, {hidden, bias});
    EXPECT_TRUE(at::allclose(got[0], wanted[0], 1e-13, 1e-13)) << static_cast<int>(activation);
    EXPECT_TRUE(at::allclose(got[1], wanted[1], 1e-13, 1e-13)) << static_cast<int>(activation);
    EXPECT_TRUE(at::equal(got[1][1], at::zeros({6}, kDouble)));  // the expert without rows
    // The backward on its own (what a caller that keeps `hidden` itself runs), with and without a bias.
    const BiasActivationGrads alone =
        grouped_bias_activation_backward(upstream, hidden.detach(), bias.detach(), offsets, activation);
    EXPECT_TRUE(at::allclose(alone.hidden, wanted[0], 1e-13, 1e-13)) << static_cast<int>(activation);
    EXPECT_TRUE(at::allclose(alone.bias, wanted[1], 1e-13, 1e-13)) << static_cast<int>(activation);
    const BiasActivationGrads unbiased =
        grouped_bias_activation_backward(upstream, x.detach(), at::Tensor(), offsets, activation);
    EXPECT_TRUE(at::allclose(unbiased.hidden, wanted[0], 1e-13, 1e-13)) << static_cast<int>(activation);
    EXPECT_FALSE(unbiased.bias.defined());
  }
}

}  // namespace
}  // namespace graphed::kernels
