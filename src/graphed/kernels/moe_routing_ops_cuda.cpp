// kernels/moe_routing_ops_cuda.cpp — the CUDA build's MoE routing ops: autograd functions over kernels/moe_routing.h
// and kernels/moe_expert_rows.h for CUDA tensors of fp32 or bf16 within the kernels' limits; anything else goes to the
// reference.
#include <ATen/cuda/CUDAContext.h>
#include <torch/csrc/autograd/custom_function.h>

#include "graphed/kernels/detail/aten_glue.h"
#include "graphed/kernels/moe_routing.h"
#include "graphed/kernels/moe_routing_ops.h"
#include "graphed/util/error.h"

namespace graphed::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

bool kernel_element(at::ScalarType type) { return type == at::kFloat || type == at::kBFloat16; }

Element element(at::ScalarType type) { return type == at::kFloat ? Element::kFloat32 : Element::kBFloat16; }

/// A gradient as the kernels read it: the type given, contiguous.
at::Tensor as_read(const at::Tensor& gradient, at::ScalarType type) { return gradient.to(type).contiguous(); }

const float* data_or_null(const at::Tensor& tensor) { return tensor.defined() ? tensor.data_ptr<float>() : nullptr; }

RouteShape route_shape(const at::Tensor& logits, int64_t top_k, bool pre_softmax) {
  RouteShape shape;
  shape.tokens = logits.size(0);
  shape.experts = logits.size(1);
  shape.top_k = top_k;
  shape.pre_softmax = pre_softmax;
  shape.logits = element(logits.scalar_type());
  return shape;
}

struct RouteFunction : torch::autograd::Function<RouteFunction> {
  static tensor_list forward(AutogradContext* context, const at::Tensor& logits, int64_t top_k, bool pre_softmax) {
    const RouteShape shape = route_shape(logits, top_k, pre_softmax);
    const auto floats = logits.options().dtype(at::kFloat);
    at::Tensor probabilities = at::empty({shape.tokens, shape.experts}, floats);
    at::Tensor weights = at::empty({shape.tokens, top_k}, floats);
    at::Tensor indices = at::empty({shape.tokens, top_k}, logits.options().dtype(at::kLong));
    at::Tensor mass = at::empty({shape.experts}, floats);
    at::Tensor counts = at::empty({shape.experts}, floats);
    const auto stream = detail::current_stream();
    launch_route_forward(logits.data_ptr(), probabilities.data_ptr<float>(), weights.data_ptr<float>(),
                         indices.data_ptr<int64_t>(), shape, stream);
    launch_route_sums(probabilities.data_ptr<float>(), indices.data_ptr<int64_t>(), mass.data_ptr<float>(),
                      counts.data_ptr<float>(), shape, stream);
    context->save_for_backward({probabilities, weights, indices});
    context->saved_data["top_k"] = top_k;
    context->saved_data["pre_softmax"] = pre_softmax;
    context->saved_data["logits_type"] = static_cast<int64_t>(logits.scalar_type());
    context->mark_non_differentiable({indices, counts});
    return {weights, indices, mass, counts};
  }

  static tensor_list backward(AutogradContext* context, tensor_list grads) {
    const auto saved = context->get_saved_variables();
    const at::Tensor& probabilities = saved[0];
    const at::Tensor& weights = saved[1];
    const at::Tensor& indices = saved[2];
    const auto logits_type = static_cast<at::ScalarType>(context->saved_data["logits_type"].toInt());
    const at::Tensor grad_weights = grads[0].defined() ? as_read(grads[0], at::kFloat) : at::Tensor();
    const at::Tensor grad_mass = grads[2].defined() ? as_read(grads[2], at::kFloat) : at::Tensor();
    at::Tensor grad_logits = at::empty(probabilities.sizes(), probabilities.options().dtype(logits_type));
    RouteShape shape;
    shape.tokens = probabilities.size(0);
    shape.experts = probabilities.size(1);
    shape.top_k = context->saved_data["top_k"].toInt();
    shape.pre_softmax = context->saved_data["pre_softmax"].toBool();
    shape.logits = element(logits_type);
    launch_route_backward(probabilities.data_ptr<float>(), weights.data_ptr<float>(), indices.data_ptr<int64_t>(),
                          data_or_null(grad_weights), data_or_null(grad_mass), grad_logits.data_ptr(), shape,
                          detail::current_stream());
    return {grad_logits, at::Tensor(), at::Tensor()};
  }
};

struct SwitchLossFunction : torch::autograd::Function<SwitchLossFunction> {
  static at::Tensor forward(AutogradContext* context, const at::Tensor& mass, const at::Tensor& counts, double scale) {
    at::Tensor loss = at::empty({}, mass.options());
    launch_switch_loss(mass.data_ptr<float>(), counts.data_ptr<float>(), static_cast<float>(scale),
                       loss.data_ptr<float>(), mass.numel(), detail::current_stream());
    context->save_for_backward({counts});
    context->saved_data["scale"] = scale;
    return loss;
  }

  static tensor_list backward(AutogradContext* context, tensor_list grads) {
    const at::Tensor counts = context->get_saved_variables()[0];
    const at::Tensor grad_loss = as_read(grads[0], at::kFloat);
    at::Tensor grad_mass = at::empty_like(counts);
    launch_switch_loss_backward(counts.data_ptr<float>(), grad_loss.data_ptr<float>(),
                                static_cast<float>(context->saved_data["scale"].toDouble()),
                                grad_mass.data_ptr<float>(), counts.numel(), detail::current_stream());
    return {grad_mass, at::Tensor(), at::Tensor()};
  }
};

PermuteShape permute_shape(int64_t tokens, int64_t top_k, int64_t columns) {
  PermuteShape shape;
  shape.tokens = tokens;
  shape.top_k = top_k;
  shape.columns = columns;
  return shape;
}

struct PermuteFunction : torch::autograd::Function<PermuteFunction> {
  static at::Tensor forward(AutogradContext* context, const at::Tensor& tokens, const at::Tensor& order,
                            const at::Tensor& destination, int64_t top_k, int64_t type) {
    const auto sorted_type = static_cast<at::ScalarType>(type);
    const PermuteShape shape = permute_shape(tokens.size(0), top_k, tokens.size(1));
    at::Tensor sorted = at::empty({order.numel(), shape.columns}, tokens.options().dtype(sorted_type));
    launch_permute(tokens.data_ptr(), element(tokens.scalar_type()), order.data_ptr<int64_t>(), sorted.data_ptr(),
                   element(sorted_type), shape, detail::current_stream());
    context->save_for_backward({destination});
    context->saved_data["top_k"] = top_k;
    context->saved_data["token_type"] = static_cast<int64_t>(tokens.scalar_type());
    context->saved_data["tokens"] = tokens.size(0);
    return sorted;
  }

  static tensor_list backward(AutogradContext* context, tensor_list grads) {
    const at::Tensor destination = context->get_saved_variables()[0];
    const auto token_type = static_cast<at::ScalarType>(context->saved_data["token_type"].toInt());
    const at::Tensor gradient = grads[0].contiguous();
    const PermuteShape shape =
        permute_shape(context->saved_data["tokens"].toInt(), context->saved_data["top_k"].toInt(), gradient.size(1));
    const at::Tensor read = kernel_element(gradient.scalar_type()) ? gradient : gradient.to(at::kFloat);
    at::Tensor grad_tokens = at::empty({shape.tokens, shape.columns}, gradient.options().dtype(token_type));
    launch_permute_backward(read.data_ptr(), element(read.scalar_type()), destination.data_ptr<int64_t>(),
                            grad_tokens.data_ptr(), element(token_type), shape, detail::current_stream());
    return {grad_tokens, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

struct UnpermuteFunction : torch::autograd::Function<UnpermuteFunction> {
  static at::Tensor forward(AutogradContext* context, const at::Tensor& expert_output, const at::Tensor& weights,
                            const at::Tensor& order, const at::Tensor& destination) {
    const PermuteShape shape = permute_shape(weights.size(0), weights.size(1), expert_output.size(1));
    at::Tensor out = at::empty({shape.tokens, shape.columns}, expert_output.options());
    launch_unpermute(expert_output.data_ptr(), element(expert_output.scalar_type()), weights.data_ptr<float>(),
                     destination.data_ptr<int64_t>(), out.data_ptr(), shape, detail::current_stream());
    context->save_for_backward({expert_output, weights, order});
    return out;
  }

  static tensor_list backward(AutogradContext* context, tensor_list grads) {
    const auto saved = context->get_saved_variables();
    const at::Tensor& expert_output = saved[0];
    const at::Tensor& weights = saved[1];
    const at::Tensor& order = saved[2];
    const at::Tensor gradient = as_read(grads[0], expert_output.scalar_type());
    const PermuteShape shape = permute_shape(weights.size(0), weights.size(1), expert_output.size(1));
    at::Tensor grad_output = at::empty_like(expert_output);
    at::Tensor grad_weights = at::empty_like(weights);
    launch_unpermute_backward(gradient.data_ptr(), expert_output.data_ptr(), element(expert_output.scalar_type()),
                              weights.data_ptr<float>(), order.data_ptr<int64_t>(), grad_output.data_ptr(),
                              grad_weights.data_ptr<float>(), shape, detail::current_stream());
    return {grad_output, grad_weights, at::Tensor(), at::Tensor()};
  }
};

BiasActivationShape bias_activation_shape(const at::Tensor& hidden, const at::Tensor& offsets,
                                          ExpertActivation activation) {
  BiasActivationShape shape;
  shape.rows = hidden.size(0);
  shape.columns = hidden.size(1);
  shape.experts = offsets.numel() - 1;
  shape.activation = activation;
  return shape;
}

/// The kernel's gradients through the activation, recomputed from hidden and bias (present or empty); the bias's
/// only `with_bias` and with one.
BiasActivationGrads bias_activation_gradients(const at::Tensor& grad_out, const at::Tensor& hidden,
                                              const at::Tensor& bias, const at::Tensor& offsets,
                                              ExpertActivation activation, bool with_bias) {
  const BiasActivationShape shape = bias_activation_shape(hidden, offsets, activation);
  const at::Tensor gradient = grad_out.contiguous();
  const at::Tensor read = kernel_element(gradient.scalar_type()) ? gradient : gradient.to(at::kFloat);
  BiasActivationGrads grads;
  grads.hidden = at::empty_like(hidden);
  const bool sums = detail::present(bias) && with_bias;
  if (sums) grads.bias = at::empty_like(bias);
  launch_bias_activation_backward(
      read.data_ptr(), element(read.scalar_type()), hidden.data_ptr(), element(hidden.scalar_type()),
      detail::present(bias) ? bias.data_ptr<float>() : nullptr, offsets.data_ptr<int64_t>(), grads.hidden.data_ptr(),
      sums ? grads.bias.data_ptr<float>() : nullptr, shape, detail::current_stream());
  return grads;
}

struct BiasActivationFunction : torch::autograd::Function<BiasActivationFunction> {
  /// `bias` empty: none.
  static at::Tensor forward(AutogradContext* context, const at::Tensor& hidden, const at::Tensor& bias,
                            const at::Tensor& offsets, int64_t activation, int64_t type) {
    const BiasActivationShape shape = bias_activation_shape(hidden, offsets, static_cast<ExpertActivation>(activation));
    const auto out_type = static_cast<at::ScalarType>(type);
    const int64_t out_columns = shape.activation == ExpertActivation::kSwiglu ? shape.columns / 2 : shape.columns;
    at::Tensor out = at::empty({shape.rows, out_columns}, hidden.options().dtype(out_type));
    const float* bias_data = detail::present(bias) ? bias.data_ptr<float>() : nullptr;
    launch_bias_activation(hidden.data_ptr(), element(hidden.scalar_type()), bias_data, offsets.data_ptr<int64_t>(),
                           out.data_ptr(), element(out_type), shape, detail::current_stream());
    context->save_for_backward({hidden, bias, offsets});
    context->saved_data["activation"] = activation;
    return out;
  }

  static tensor_list backward(AutogradContext* context, tensor_list grads) {
    const auto saved = context->get_saved_variables();
    const auto activation = static_cast<ExpertActivation>(context->saved_data["activation"].toInt());
    const BiasActivationGrads out =
        bias_activation_gradients(grads[0], saved[0], saved[1], saved[2], activation, context->needs_input_grad(1));
    return {out.hidden, out.bias, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

bool bias_activation_kernel_takes(const at::Tensor& hidden, const at::Tensor& bias, const at::Tensor& offsets,
                                  ExpertActivation activation, at::ScalarType type) {
  const bool bias_fits = !bias.defined() || (bias.scalar_type() == at::kFloat && bias.dim() == 2 &&
                                             bias.size(0) == offsets.numel() - 1 && bias.size(1) == hidden.size(1));
  return hidden.is_cuda() && hidden.dim() == 2 && kernel_element(hidden.scalar_type()) && kernel_element(type) &&
         bias_fits && offsets.scalar_type() == at::kLong &&
         (activation != ExpertActivation::kSwiglu || hidden.size(1) % 2 == 0);
}

}  // namespace

RouteDecision moe_route(const at::Tensor& logits, int64_t top_k, bool pre_softmax) {
  const bool kernel = logits.is_cuda() && kernel_element(logits.scalar_type()) && logits.dim() == 2 &&
                      logits.size(1) <= kRouteMaxExperts && top_k <= kRouteMaxTopK && top_k <= logits.size(1) &&
                      top_k > 0;
  if (!kernel) return reference::moe_route(logits, top_k, pre_softmax);
  const tensor_list outputs = RouteFunction::apply(logits.contiguous(), top_k, pre_softmax);
  return {outputs[0], outputs[1], outputs[2], outputs[3]};
}

at::Tensor switch_balance_loss(const at::Tensor& mass, const at::Tensor& counts, double scale) {
  const bool kernel = mass.is_cuda() && mass.scalar_type() == at::kFloat && counts.scalar_type() == at::kFloat &&
                      mass.dim() == 1 && counts.sizes() == mass.sizes();
  if (!kernel) return reference::switch_balance_loss(mass, counts, scale);
  return SwitchLossFunction::apply(mass.contiguous(), counts.detach().contiguous(), scale);
}

SortPlan moe_sort_plan(const at::Tensor& experts_of, int64_t experts) {
  const at::Tensor flat = experts_of.reshape({-1}).contiguous();
  const bool kernel = flat.is_cuda() && flat.scalar_type() == at::kLong && flat.numel() <= kSortPlanMaxAssignments &&
                      experts <= kSortPlanMaxExperts && experts > 0;
  if (!kernel) return reference::moe_sort_plan(flat, experts);
  SortPlan plan;
  plan.order = at::empty_like(flat);
  plan.destination = at::empty_like(flat);
  plan.counts = at::empty({experts}, flat.options());
  plan.offsets = at::empty({experts + 1}, flat.options());
  launch_sort_plan(flat.data_ptr<int64_t>(), flat.numel(), experts, plan.order.data_ptr<int64_t>(),
                   plan.destination.data_ptr<int64_t>(), plan.counts.data_ptr<int64_t>(),
                   plan.offsets.data_ptr<int64_t>(), detail::current_stream());
  return plan;
}

at::Tensor moe_permute(const at::Tensor& tokens, const at::Tensor& order, const at::Tensor& destination, int64_t top_k,
                       at::ScalarType type) {
  const bool kernel = tokens.is_cuda() && tokens.dim() == 2 && kernel_element(tokens.scalar_type()) &&
                      kernel_element(type) && order.scalar_type() == at::kLong &&
                      destination.scalar_type() == at::kLong;
  if (!kernel) return reference::moe_permute(tokens, order, destination, top_k, type);
  return PermuteFunction::apply(tokens.contiguous(), order.contiguous(), destination.contiguous(), top_k,
                                static_cast<int64_t>(type));
}

at::Tensor moe_unpermute(const at::Tensor& expert_output, const at::Tensor& weights, const at::Tensor& order,
                         const at::Tensor& destination) {
  const bool kernel = expert_output.is_cuda() && expert_output.dim() == 2 &&
                      kernel_element(expert_output.scalar_type()) && weights.scalar_type() == at::kFloat &&
                      weights.dim() == 2 && order.scalar_type() == at::kLong && destination.scalar_type() == at::kLong;
  if (!kernel) return reference::moe_unpermute(expert_output, weights, order, destination);
  return UnpermuteFunction::apply(expert_output.contiguous(), weights.contiguous(), order.contiguous(),
                                  destination.contiguous());
}

at::Tensor grouped_bias_activation(const at::Tensor& hidden, const at::Tensor& bias, const at::Tensor& offsets,
                                   ExpertActivation activation, at::ScalarType type) {
  if (!bias_activation_kernel_takes(hidden, bias, offsets, activation, type)) {
    return reference::grouped_bias_activation(hidden, bias, offsets, activation, type);
  }
  return BiasActivationFunction::apply(hidden.contiguous(), detail::or_empty(bias, hidden).contiguous(),
                                       offsets.contiguous(), static_cast<int64_t>(activation),
                                       static_cast<int64_t>(type));
}

BiasActivationGrads grouped_bias_activation_backward(const at::Tensor& grad_out, const at::Tensor& hidden,
                                                     const at::Tensor& bias, const at::Tensor& offsets,
                                                     ExpertActivation activation) {
  if (!bias_activation_kernel_takes(hidden, bias, offsets, activation, grad_out.scalar_type())) {
    return reference::grouped_bias_activation_backward(grad_out, hidden, bias, offsets, activation);
  }
  return bias_activation_gradients(grad_out, hidden.contiguous(), detail::or_empty(bias, hidden).contiguous(),
                                   offsets.contiguous(), activation, /*with_bias=*/true);
}

}  // namespace graphed::kernels
