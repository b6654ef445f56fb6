// kernels/moe_routing_ops_cpu.cpp — the CPU build's MoE routing ops: the reference (kernels/moe_routing_ops.h).
#include "graphed/kernels/moe_routing_ops.h"

namespace graphed::kernels {

RouteDecision moe_route(const at::Tensor& logits, int64_t top_k, bool pre_softmax) {
  return reference::moe_route(logits, top_k, pre_softmax);
}

at::Tensor switch_balance_loss(const at::Tensor& mass, const at::Tensor& counts, double scale) {
  return reference::switch_balance_loss(mass, counts, scale);
}

SortPlan moe_sort_plan(const at::Tensor& experts_of, int64_t experts) {
  return reference::moe_sort_plan(experts_of, experts);
}

at::Tensor moe_permute(const at::Tensor& tokens, const at::Tensor& order, const at::Tensor& destination, int64_t top_k,
                       at::ScalarType type) {
  return reference::moe_permute(tokens, order, destination, top_k, type);
}

at::Tensor moe_unpermute(const at::Tensor& expert_output, const at::Tensor& weights, const at::Tensor& order,
                         const at::Tensor& destination) {
  return reference::moe_unpermute(expert_output, weights, order, destination);
}

at::Tensor grouped_bias_activation(const at::Tensor& hidden, const at::Tensor& bias, const at::Tensor& offsets,
                                   ExpertActivation activation, at::ScalarType type) {
  return reference::grouped_bias_activation(hidden, bias, offsets, activation, type);
}

BiasActivationGrads grouped_bias_activation_backward(const at::Tensor& grad_out, const at::Tensor& hidden,
                                                     const at::Tensor& bias, const at::Tensor& offsets,
                                                     ExpertActivation activation) {
  return reference::grouped_bias_activation_backward(grad_out, hidden, bias, offsets, activation);
}

}  // namespace graphed::kernels
