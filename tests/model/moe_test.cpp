// tests/model/moe_test.cpp — MoE dispatch modes agree when nothing is dropped, drop-and-pad really
// drops beyond capacity, the mode chosen at construction decides the preprocess unit's outputs, the
// load-balancing loss follows Megatron's formula, and the routing options (pre-softmax, the shared
// expert's gate) compute what they say.
#include "graphed/model/moe.h"

#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

namespace graphed::model {
namespace {

MoeShape shape(std::optional<double> capacity_factor, bool pad) {
  MoeShape s;
  s.hidden_size = 16;
  s.num_experts = 4;
  s.top_k = 2;
  s.expert_ffn_hidden_size = 24;
  s.capacity_factor = capacity_factor;
  s.pad_to_capacity = pad;
  s.aux_loss_coeff = 0.01;
  s.init_std = 0.2;
  s.output_init_std = 0.2;
  return s;
}

TEST(MoeTest, DroplessAndDropAndPadAgreeWhenNothingIsDropped) {
  at::manual_seed(3);
  Moe dropless(shape(std::nullopt, false));
  at::manual_seed(3);
  Moe padded(shape(4.0, true));  // capacity factor = experts / 1: every expert can take every token
  dropless->to(at::kDouble);
  padded->to(at::kDouble);
  const at::Tensor x = at::randn({10, 16}, at::kDouble).requires_grad_(true);
  auto [a, aux_a] = dropless->forward(x);
  auto [b, aux_b] = padded->forward(x);
  EXPECT_TRUE(at::allclose(a, b, 1e-12, 1e-12));
  EXPECT_TRUE(at::allclose(aux_a, aux_b));
  const auto grad_a = torch::autograd::grad({a.sum()}, {x})[0];
  const auto grad_b = torch::autograd::grad({b.sum()}, {x})[0];
  EXPECT_TRUE(at::allclose(grad_a, grad_b, 1e-12, 1e-12));
}

// --moe-grouped-gemm: the same dropless computation through one grouped product per GEMM (the reference on the CPU),
// with and without biases and SwiGLU; every parameter's gradient too.
TEST(MoeTest, GroupedDroplessEqualsDropless) {
  for (const bool swiglu : {false, true}) {
    for (const bool bias : {true, false}) {
      SCOPED_TRACE(std::string(swiglu ? "swiglu" : "gelu") + (bias ? ", bias" : ", no bias"));
      MoeShape plain_shape = shape(std::nullopt, false);
      plain_shape.swiglu = swiglu;
      plain_shape.bias = bias;
      MoeShape grouped_shape = plain_shape;
      grouped_shape.grouped_gemm = true;
      at::manual_seed(7);
      Moe dropless(plain_shape);
      at::manual_seed(7);
      Moe grouped(grouped_shape);
      dropless->to(at::kDouble);
      grouped->to(at::kDouble);
      const at::Tensor x = at::randn({13, 16}, at::kDouble).requires_grad_(true);
      auto [a, aux_a] = dropless->forward(x);
      auto [b, aux_b] = grouped->forward(x);
      EXPECT_TRUE(at::allclose(a, b, 1e-12, 1e-12));
      const at::Tensor upstream = at::randn_like(a);
      (a * upstream).sum().backward();
      (b * upstream).sum().backward();
      for (const auto& item : dropless->named_parameters()) {
        const at::Tensor other = grouped->named_parameters()[item.key()].grad();
        ASSERT_TRUE(other.defined()) << item.key();
        EXPECT_TRUE(at::allclose(item.value().grad(), other, 1e-10, 1e-12)) << item.key();
      }
    }
  }
}

TEST(MoeTest, GroupedDroplessInputGradientEqualsDropless) {
  MoeShape grouped_shape = shape(std::nullopt, false);
  grouped_shape.grouped_gemm = true;
  at::manual_seed(8);
  Moe dropless(shape(std::nullopt, false));
  at::manual_seed(8);
  Moe grouped(grouped_shape);
  dropless->to(at::kDouble);
  grouped->to(at::kDouble);
  const at::Tensor x = at::randn({9, 16}, at::kDouble).requires_grad_(true);
  const at::Tensor grad_a = torch::autograd::grad({dropless->forward(x).first.pow(2).sum()}, {x})[0];
  const at::Tensor grad_b = torch::autograd::grad({grouped->forward(x).first.pow(2).sum()}, {x})[0];
  EXPECT_TRUE(at::allclose(grad_a, grad_b, 1e-12, 1e-12));
}

TEST(MoeTest, DropAndPadKeepsAtMostCapacityPerExpert) {
  at::manual_seed(4);
  Moe moe(shape(0.5, true));
  const at::Tensor x = at::randn({16, 16});
  const Routing routing = moe->route(x);
  const DispatchPlan plan = moe->plan(routing.indices, routing.weights);
  const int64_t capacity = moe->capacity(16);
  EXPECT_EQ(capacity, 4);  // ceil(16 x 2 / 4 x 0.5)
  ASSERT_EQ(plan.gather_index.numel(), 4 * capacity);
  const at::Tensor kept = plan.gather_index.lt(32);
  EXPECT_LE(kept.sum().item<int64_t>(), 4 * capacity);
  // Every kept slot holds an assignment routed to that expert.
  const at::Tensor experts = routing.indices.reshape({-1});
  for (int64_t slot = 0; slot < plan.gather_index.numel(); ++slot) {
    const int64_t assignment = plan.gather_index[slot].item<int64_t>();
    if (assignment < 32) EXPECT_EQ(experts[assignment].item<int64_t>(), slot / capacity);
  }
  // Dropping changes the output compared with the dropless computation.
  Moe dropless(shape(std::nullopt, false));
  at::NoGradGuard no_grad;
  for (const auto& name : {"router_weight", "experts_w1", "experts_w2", "experts_b1", "experts_b2"}) {
    dropless->named_parameters()[name].copy_(moe->named_parameters()[name]);
  }
  EXPECT_FALSE(at::allclose(moe->forward(x).first, dropless->forward(x).first));
}

TEST(MoeTest, TheModeChosenAtConstructionShapesThePreprocessOutputs) {
  struct Case {
    std::optional<double> capacity_factor;
    bool pad;
    std::size_t plan_tensors;  // drop-and-pad: gather_index; dropless: order, destination, counts and offsets
  };
  for (const Case& mode : {Case{std::nullopt, false, 4}, Case{1.0, false, 4}, Case{1.0, true, 1}}) {
    at::manual_seed(6);
    Moe moe(shape(mode.capacity_factor, mode.pad));
    const at::Tensor x = at::randn({8, 16});
    const Routing routing = moe->route(x);
    const DispatchPlan plan = moe->plan(routing.indices, routing.weights);
    const std::vector<at::Tensor> tensors = moe->plan_tensors(plan);
    ASSERT_EQ(tensors.size(), mode.plan_tensors);
    // The experts compute the same from the plan and from the preprocess unit's outputs.
    at::NoGradGuard no_grad;
    EXPECT_TRUE(at::equal(moe->run_experts(x, routing.weights, plan),
                          moe->run_experts(x, routing.weights, moe->plan_from_tensors(tensors))));
  }
}

TEST(MoeTest, AuxLossFollowsTheSwitchFormula) {
  at::manual_seed(5);
  Moe moe(shape(std::nullopt, false));
  const at::Tensor x = at::randn({8, 16});
  const Routing routing = moe->route(x);
  const at::Tensor probabilities = at::softmax(at::linear(x, moe->named_parameters()["router_weight"]), -1);
  double expected = 0;
  for (int64_t e = 0; e < 4; ++e) {
    const double tokens = routing.indices.eq(e).sum().item<double>();
    expected += probabilities.select(1, e).sum().item<double>() * tokens;
  }
  expected *= 4 * 0.01 / (2.0 * 8 * 8);
  EXPECT_NEAR(routing.aux_loss.item<double>(), expected, 1e-7);
  EXPECT_TRUE(at::allclose(routing.weights.sum(-1), at::ones({8})));
}

// --moe-router-pre-softmax: the k largest of the softmax over every expert, as they are; without it the k largest
// logits softmaxed among themselves, which is the same experts with those probabilities renormalised.
TEST(MoeTest, PreSoftmaxKeepsTheProbabilitiesAndTheDefaultRenormalisesThem) {
  MoeShape pre_shape = shape(std::nullopt, false);
  pre_shape.pre_softmax = true;
  at::manual_seed(11);
  Moe pre(pre_shape);
  at::manual_seed(11);
  Moe post(shape(std::nullopt, false));
  pre->to(at::kDouble);
  post->to(at::kDouble);
  const at::Tensor x = at::randn({9, 16}, at::kDouble);
  const at::Tensor probabilities = at::softmax(at::linear(x, pre->named_parameters()["router_weight"]), -1);
  const auto top = probabilities.topk(2, -1);
  const Routing a = pre->route(x);
  const Routing b = post->route(x);
  EXPECT_TRUE(at::equal(a.indices, std::get<1>(top)));
  EXPECT_TRUE(at::equal(b.indices, std::get<1>(top)));
  EXPECT_TRUE(at::allclose(a.weights, std::get<0>(top), 1e-14, 1e-14));
  EXPECT_TRUE(at::allclose(b.weights, std::get<0>(top) / std::get<0>(top).sum(-1, true), 1e-14, 1e-14));
  EXPECT_TRUE(at::allclose(a.aux_loss, b.aux_loss)) << "the load-balancing loss sees the same softmax and counts";
  EXPECT_TRUE((a.weights.sum(-1) < 1.0).all().item<bool>());
}

// --moe-shared-expert-gate: the shared expert's output times sigmoid(tokens . gate), and the gate learns.
TEST(MoeTest, TheSharedExpertGateScalesItsOutputPerToken) {
  MoeShape gated_shape = shape(std::nullopt, false);
  gated_shape.shared_expert_size = 20;
  gated_shape.shared_expert_gate = true;
  MoeShape plain_shape = gated_shape;
  plain_shape.shared_expert_gate = false;
  at::manual_seed(5);
  Moe gated(gated_shape);
  at::manual_seed(5);
  Moe plain(plain_shape);
  gated->to(at::kDouble);
  plain->to(at::kDouble);
  const auto parameters = gated->named_parameters();
  ASSERT_TRUE(parameters.contains("shared_expert_gate"));
  const at::Tensor gate = parameters["shared_expert_gate"];
  EXPECT_EQ(gate.sizes(), at::IntArrayRef({1, 16}));
  const at::Tensor x = at::randn({7, 16}, at::kDouble);
  const at::Tensor expected = plain->shared_expert(x) * at::sigmoid(at::linear(x, gate));
  EXPECT_TRUE(at::allclose(gated->shared_expert(x), expected, 1e-14, 1e-14));
  auto [output, aux] = gated->forward(x);
  const at::Tensor gradient = torch::autograd::grad({output.sum()}, {gate})[0];
  EXPECT_GT(gradient.abs().sum().item<double>(), 0.0);
}

}  // namespace
}  // namespace graphed::model
