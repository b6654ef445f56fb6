// kernels/training_ops_reference.cpp — the ATen forms of kernels/training_ops.h's operations (namespace reference),
// in both builds (one convention for the two builds: src/graphed/CMakeLists.txt): what training_ops_cpu.cpp runs,
// what training_ops_cuda.cpp falls back to, and what the fused kernels are tested against.
#include "graphed/kernels/training_ops.h"

#include <ATen/core/grad_mode.h>

namespace graphed::kernels::reference {
namespace {

at::ScalarType compute_type(const at::Tensor& input) { return at::promote_types(input.scalar_type(), at::kFloat); }

at::Tensor as_type(const at::Tensor& tensor, at::ScalarType type) {
  return tensor.scalar_type() == type ? tensor : tensor.to(type);
}

}  // namespace

at::Tensor norm(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias, double epsilon,
                at::ScalarType output_type) {
  const at::ScalarType compute = compute_type(input);
  const at::Tensor x = as_type(input, compute);
  at::Tensor y;
  if (bias.defined()) {
    y = at::layer_norm(x, {x.size(-1)}, as_type(weight, compute), as_type(bias, compute), epsilon);
  } else {
    y = x * at::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + epsilon) * as_type(weight, compute);
  }
  return as_type(y, output_type);
}

at::Tensor linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) {
  // Outside autocast a bf16 input (a fused norm's output) meets fp32 masters: the weights follow the input.
  const at::ScalarType type = input.scalar_type();
  return at::linear(input, as_type(weight, type), bias.defined() ? as_type(bias, type) : bias);
}

at::Tensor rotate_halves(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const auto halves = x.chunk(2, -1);
  return at::cat({halves[0] * cos - halves[1] * sin, halves[1] * cos + halves[0] * sin}, -1);
}

at::Tensor rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t seq = x.size(2);
  return rotate_halves(x, as_type(cos.narrow(0, 0, seq), x.scalar_type()),
                       as_type(sin.narrow(0, 0, seq), x.scalar_type()));
}

at::Tensor swiglu(const at::Tensor& x) {
  const auto halves = x.chunk(2, -1);
  return at::silu(halves[0]) * halves[1];
}

at::Tensor residual_add(const at::Tensor& hidden, const at::Tensor& update) { return hidden + update; }

at::Tensor linear_cross_entropy(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& labels) {
  const at::Tensor logits = at::linear(hidden, weight);
  return at::cross_entropy_loss(as_type(logits, compute_type(logits)).view({-1, logits.size(-1)}),
                                labels.reshape({-1}));
}

void adamw_step(const at::Tensor& parameters, const at::Tensor& gradients, const at::Tensor& exp_avg,
                const at::Tensor& exp_avg_sq, const at::Tensor& working_copy, const at::Tensor& learning_rate,
                const at::Tensor& step, const std::optional<at::Tensor>& grad_scale, const AdamWSettings& settings) {
  // Written out rather than compat::adamw_step: on CUDA that is PyTorch's fused kernel, which rounds
  // 1 - beta to fp32 first (1.3e-5 relative in the second moment), and the kernel's reference must be the
  // exact arithmetic. The same arithmetic as compat's CPU loop.
  at::NoGradGuard no_grad;
  const at::Tensor& lr = learning_rate;
  const at::Tensor steps = step.to(parameters.scalar_type());
  const at::Tensor gradient = grad_scale ? gradients / *grad_scale : gradients;
  parameters.mul_(1.0 - lr * settings.weight_decay);
  exp_avg.lerp_(gradient, 1.0 - settings.beta1);
  exp_avg_sq.mul_(settings.beta2).addcmul_(gradient, gradient, 1.0 - settings.beta2);
  const at::Tensor bias1 = 1.0 - at::pow(settings.beta1, steps);
  const at::Tensor bias2_sqrt = at::sqrt(1.0 - at::pow(settings.beta2, steps));
  const at::Tensor denominator = exp_avg_sq.sqrt() / bias2_sqrt + settings.eps;
  parameters.sub_(exp_avg / denominator * (lr / bias1));
  if (working_copy.defined()) working_copy.copy_(parameters);
}

}  // namespace graphed::kernels::reference
