// kernels/moe_routing_reference.cpp — the MoE routing ops in LibTorch's ops (kernels/moe_routing_ops.h): the CPU
// build's, the CUDA build's beyond the kernels' limits, and what the kernels are tested against.
#include <vector>

#include <torch/csrc/autograd/autograd.h>

#include "graphed/kernels/grouped_gemm_ops.h"
#include "graphed/kernels/moe_routing_ops.h"
#include "graphed/kernels/training_ops.h"

namespace graphed::kernels::reference {

RouteDecision moe_route(const at::Tensor& logits, int64_t top_k, bool pre_softmax) {
  const auto compute = at::promote_types(logits.scalar_type(), at::kFloat);
  const at::Tensor wide = logits.to(compute);
  const at::Tensor probabilities = at::softmax(wide, -1);
  // A stable descending sort keeps equal values in expert order: ties go to the lower expert.
  const at::Tensor chosen =
      std::get<1>(at::sort(pre_softmax ? probabilities : wide, /*stable=*/true, -1, /*descending=*/true))
          .narrow(-1, 0, top_k);
  RouteDecision decision;
  decision.indices = chosen;
  decision.weights = pre_softmax ? probabilities.gather(-1, chosen) : at::softmax(wide.gather(-1, chosen), -1);
  decision.mass = probabilities.sum(0);
  decision.counts = at::zeros({logits.size(-1)}, wide.options())
                        .index_add_(0, chosen.reshape({-1}), at::ones({chosen.numel()}, wide.options()));
  return decision;
}

at::Tensor switch_balance_loss(const at::Tensor& mass, const at::Tensor& counts, double scale) {
  return (mass * counts).sum() * scale;
}

SortPlan moe_sort_plan(const at::Tensor& experts_of, int64_t experts) {
  const at::Tensor flat = experts_of.reshape({-1});
  SortPlan plan;
  plan.order = std::get<1>(at::sort(flat, /*stable=*/true, 0, /*descending=*/false));
  plan.destination = at::empty_like(plan.order).scatter_(0, plan.order, at::arange(flat.numel(), flat.options()));
  plan.counts = at::zeros({experts}, flat.options()).index_add_(0, flat, at::ones_like(flat));
  plan.offsets = at::cat({at::zeros({1}, flat.options()), plan.counts.cumsum(0)});
  return plan;
}

at::Tensor moe_permute(const at::Tensor& tokens, const at::Tensor& order, const at::Tensor& /*destination*/,
                       int64_t top_k, at::ScalarType type) {
  return tokens.index_select(0, at::div(order, top_k, "floor")).to(type);
}

at::Tensor moe_unpermute(const at::Tensor& expert_output, const at::Tensor& weights, const at::Tensor& /*order*/,
                         const at::Tensor& destination) {
  const int64_t top_k = weights.size(-1);
  const int64_t h = expert_output.size(1);
  const at::Tensor chosen = expert_output.index_select(0, destination).view({-1, top_k, h});
  return (chosen * weights.reshape({-1, top_k, 1}).to(expert_output.scalar_type())).sum(1);
}

at::Tensor grouped_bias_activation(const at::Tensor& hidden, const at::Tensor& bias, const at::Tensor& offsets,
                                   ExpertActivation activation, at::ScalarType type) {
  const at::Tensor biased = bias.defined() ? hidden + grouped_bias(bias, offsets, hidden.size(0)) : hidden;
  switch (activation) {
    case ExpertActivation::kGelu: return at::gelu(biased).to(type);
    case ExpertActivation::kGeluTanh: return at::gelu(biased, "tanh").to(type);
    case ExpertActivation::kSwiglu: return swiglu(biased).to(type);
    case ExpertActivation::kNone: break;
  }
  return biased.to(type);
}

BiasActivationGrads grouped_bias_activation_backward(const at::Tensor& grad_out, const at::Tensor& hidden,
                                                     const at::Tensor& bias, const at::Tensor& offsets,
                                                     ExpertActivation activation) {
  // The forward again over the kept hidden, differentiated: elementwise work, no product.
  at::AutoGradMode grad_mode(true);
  const at::Tensor own_hidden = hidden.detach().requires_grad_(true);
  const at::Tensor own_bias = bias.defined() ? bias.detach().requires_grad_(true) : at::Tensor();
  const at::Tensor out =
      reference::grouped_bias_activation(own_hidden, own_bias, offsets, activation, grad_out.scalar_type());
  std::vector<at::Tensor> inputs{own_hidden};
  if (own_bias.defined()) inputs.push_back(own_bias);
  const auto grads = torch::autograd::grad({out}, inputs, {grad_out});
  return {grads[0], own_bias.defined() ? grads[1] : at::Tensor()};
}

}  // namespace graphed::kernels::reference
