// model/norm.cpp — see model/norm.h.
#include "graphed/model/norm.h"

#include "graphed/kernels/training_ops.h"

namespace graphed::model {

NormImpl::NormImpl(int64_t hidden_size, bool rms, double epsilon) : rms_(rms), epsilon_(epsilon) {
  weight_ = register_parameter("weight", at::ones({hidden_size}));
  if (!rms_) bias_ = register_parameter("bias", at::zeros({hidden_size}));
}

at::Tensor NormImpl::forward(const at::Tensor& input) const {
  return path_->norm(input, weight_, bias_, epsilon_);  // bias_ only for LayerNorm
}

kernels::NormedStream NormImpl::forward_stream(const at::Tensor& hidden) const {
  return path_->residual_norm(hidden, weight_, bias_, epsilon_);
}

NormedLinear NormImpl::stream_then_linear(const at::Tensor& hidden, const at::Tensor& weight,
                                          const at::Tensor& bias) const {
  return path_->norm_linear(hidden, weight_, bias_, epsilon_, weight, bias);
}

at::Tensor NormImpl::forward_inference(const at::Tensor& input) const {
  return path_->inference_norm(input, weight_, bias_, epsilon_);
}

at::Tensor NormImpl::then_linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) const {
  if (!rms_) return path_->decode_linear(forward_inference(input), weight, bias, {}, {});
  kernels::LinearInput first;
  first.transform = kernels::RowTransform::kRmsNorm;
  first.norm_weight = weight_;
  first.epsilon = epsilon_;
  return path_->decode_linear(input, weight, bias, first, {});
}

}  // namespace graphed::model
