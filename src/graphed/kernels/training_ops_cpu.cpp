// kernels/training_ops_cpu.cpp — kernels/training_ops.h on a CPU build, in place of training_ops_cuda.cpp (one
// convention for the two builds: src/graphed/CMakeLists.txt): every operation is its ATen reference
// (training_ops_reference.cpp; there are no kernels to run).
#include "graphed/kernels/training_ops.h"

namespace graphed::kernels {

bool training_kernels_supported(const at::Tensor&) { return false; }

at::Tensor norm(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias, double epsilon,
                at::ScalarType output_type, bool) {
  return reference::norm(input, weight, bias, epsilon, output_type);
}

NormedStream residual_norm(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& bias, double epsilon,
                           at::ScalarType output_type, bool) {
  return {hidden, reference::norm(hidden, weight, bias, epsilon, output_type)};
}

at::Tensor linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor&, const at::Tensor& bias,
                  const at::Tensor&, bool) {
  return reference::linear(input, weight, bias);
}

at::Tensor rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  return reference::rope(x, cos, sin);
}

at::Tensor swiglu(const at::Tensor& x) { return reference::swiglu(x); }

at::Tensor residual_add(const at::Tensor& hidden, const at::Tensor& update) {
  return reference::residual_add(hidden, update);
}

at::Tensor linear_cross_entropy(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor&,
                                const at::Tensor& labels, bool, int64_t) {
  return reference::linear_cross_entropy(hidden, weight, labels);
}

void adamw_step(const at::Tensor& parameters, const at::Tensor& gradients, const at::Tensor& exp_avg,
                const at::Tensor& exp_avg_sq, const at::Tensor& working_copy, const at::Tensor& learning_rate,
                const at::Tensor& step, const std::optional<at::Tensor>& grad_scale, const AdamWSettings& settings) {
  reference::adamw_step(parameters, gradients, exp_avg, exp_avg_sq, working_copy, learning_rate, step, grad_scale,
                        settings);
}

}  // namespace graphed::kernels
