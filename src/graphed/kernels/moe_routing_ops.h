// kernels/moe_routing_ops.h — the MoE's routing and data movement as differentiable ATen ops (model/moe.h calls
// them): on a CUDA build and CUDA tensors of fp32 or bf16 within the kernels' limits, kernels/moe_routing.h's and
// kernels/moe_expert_rows.h's launches (one or two where ATen takes several, the same bits on every run and inside CUDA
// graphs); elsewhere the reference in LibTorch's ops, which is also what the kernels are tested against. Both give the
// same choices of experts (ties to the lower expert) and the same integer plans; the floating results agree within
// rounding.
#pragma once

#include <ATen/ATen.h>

#include "graphed/kernels/moe_expert_rows.h"

namespace graphed::kernels {

/// The router's decision for T tokens from its logits [T, E].
struct RouteDecision {
  at::Tensor weights;  ///< [T, k] fp32 (wider for fp64 logits): a softmax over the chosen experts' logits, or
                       ///< (pre_softmax) their probabilities under the softmax over every expert
  at::Tensor indices;  ///< [T, k] int64: the chosen experts, the largest first, ties to the lower expert
  at::Tensor mass;     ///< [E]: each expert's probability summed over the tokens (for the load-balancing loss)
  at::Tensor counts;   ///< [E]: each expert's assignments, in mass's type (no gradient)
};

/// The softmax, top-k, weights and load-balancing sums of the router, in fp32 (fp64 for fp64 logits). Gradients
/// flow from weights and mass to the logits.
RouteDecision moe_route(const at::Tensor& logits, int64_t top_k, bool pre_softmax);

/// Switch load balancing: scale x sum_e mass[e] x counts[e], a scalar of mass's type; the gradient reaches mass.
at::Tensor switch_balance_loss(const at::Tensor& mass, const at::Tensor& counts, double scale);

/// The assignments sorted by expert (stable): assignment t k + j is token t's j-th choice.
struct SortPlan {
  at::Tensor order;        ///< [A] int64: the assignment at each sorted row
  at::Tensor destination;  ///< [A] int64: each assignment's sorted row (order's inverse)
  at::Tensor counts;       ///< [E] int64: rows of each expert
  at::Tensor offsets;      ///< [E + 1] int64: expert e's rows are offsets[e] .. offsets[e + 1]
};

/// The plan for `experts_of` [A] (int64 expert ids in [0, experts)), on its device; nothing read on the host.
SortPlan moe_sort_plan(const at::Tensor& experts_of, int64_t experts);

/// sorted [A, h] of `type`: row r is token order[r] / k of tokens [T, h]. The gradient to tokens sums each token's
/// k rows (found by `destination`) in choice order.
at::Tensor moe_permute(const at::Tensor& tokens, const at::Tensor& order, const at::Tensor& destination, int64_t top_k,
                       at::ScalarType type);

/// out [T, h] in expert_output's type: token t's sum over its choices j of weights[t, j] x expert_output[destination[t
/// k + j]] (expert_output [A, h] in sorted order, weights [T, k] fp32 or wider). Gradients to both.
at::Tensor moe_unpermute(const at::Tensor& expert_output, const at::Tensor& weights, const at::Tensor& order,
                         const at::Tensor& destination);

/// activation(hidden + bias[expert of each row]) as `type` (hidden [rows, n] sorted by expert with offsets [E + 1];
/// bias fp32 [E, n], or undefined for none; SwiGLU halves the columns). The bias's gradient is each expert's column
/// sums in a fixed order.
at::Tensor grouped_bias_activation(const at::Tensor& hidden, const at::Tensor& bias, const at::Tensor& offsets,
                                   ExpertActivation activation, at::ScalarType type);

/// grouped_bias_activation's gradients for the gradient of its output `grad_out`: hidden's (of hidden's type) and, with
/// a bias, the bias's (fp32 [E, n], each expert's column sums). For a caller that keeps `hidden` itself
/// (model/paged_experts.h) rather than in an autograd graph.
struct BiasActivationGrads {
  at::Tensor hidden;
  at::Tensor bias;
};
BiasActivationGrads grouped_bias_activation_backward(const at::Tensor& grad_out, const at::Tensor& hidden,
                                                     const at::Tensor& bias, const at::Tensor& offsets,
                                                     ExpertActivation activation);

namespace reference {
RouteDecision moe_route(const at::Tensor& logits, int64_t top_k, bool pre_softmax);
at::Tensor switch_balance_loss(const at::Tensor& mass, const at::Tensor& counts, double scale);
SortPlan moe_sort_plan(const at::Tensor& experts_of, int64_t experts);
at::Tensor moe_permute(const at::Tensor& tokens, const at::Tensor& order, const at::Tensor& destination, int64_t top_k,
                       at::ScalarType type);
at::Tensor moe_unpermute(const at::Tensor& expert_output, const at::Tensor& weights, const at::Tensor& order,
                         const at::Tensor& destination);
at::Tensor grouped_bias_activation(const at::Tensor& hidden, const at::Tensor& bias, const at::Tensor& offsets,
                                   ExpertActivation activation, at::ScalarType type);
BiasActivationGrads grouped_bias_activation_backward(const at::Tensor& grad_out, const at::Tensor& hidden,
                                                     const at::Tensor& bias, const at::Tensor& offsets,
                                                     ExpertActivation activation);
}  // namespace reference

}  // namespace graphed::kernels
