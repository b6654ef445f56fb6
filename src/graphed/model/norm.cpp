// model/norm.cpp — see model/norm.h.
#include "graphed/model/norm.h"

namespace graphed::model {

NormImpl::NormImpl(int64_t hidden_size, bool rms, double epsilon) : rms_(rms), epsilon_(epsilon) {
  weight_ = register_parameter("weight", at::ones({hidden_size}));
  if (!rms_) bias_ = register_parameter("bias", at::zeros({hidden_size}));
}

at::Tensor NormImpl::forward(const at::Tensor& input) {
  const auto compute = at::promote_types(input.scalar_type(), at::kFloat);  // fp32, or fp64 in tests
  const at::Tensor x = input.to(compute);
  at::Tensor y;
  if (rms_) {
    y = x * at::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + epsilon_) * weight_.to(compute);
  } else {
    y = at::layer_norm(x, {x.size(-1)}, weight_.to(compute), bias_.to(compute), epsilon_);
  }
  return y.to(input.scalar_type());
}

}  // namespace graphed::model
