// model/norm.cpp — see model/norm.h.
#include "graphed/model/norm.h"

#include "graphed/capture/capture_state.h"
#include "graphed/kernels/decode_ops.h"
#include "graphed/kernels/training_ops.h"

namespace graphed::model {

NormImpl::NormImpl(int64_t hidden_size, bool rms, double epsilon) : rms_(rms), epsilon_(epsilon) {
  weight_ = register_parameter("weight", at::ones({hidden_size}));
  if (!rms_) bias_ = register_parameter("bias", at::zeros({hidden_size}));
}

at::Tensor NormImpl::forward(const at::Tensor& input) const {
  if (fused_) {
    // A graph's warmup runs the backward only to look at the gradients (autograd::grad), or as an ordinary
    // iteration: either way autograd's own accumulation, whose bits in-place accumulation repeats.
    const bool in_place = fused_->accumulates_in_place() && !capture::is_graph_warmup();
    return kernels::norm(input, weight_, bias_, epsilon_, fused_->activation_type(), in_place);
  }
  // Compute in fp32 (fp64 in gradient tests); skip casts that would not change the dtype, since every
  // dispatched operator costs host time in a launch-bound eager loop.
  const auto compute = at::promote_types(input.scalar_type(), at::kFloat);
  const auto as_compute = [compute](const at::Tensor& t) { return t.scalar_type() == compute ? t : t.to(compute); };
  const at::Tensor x = as_compute(input);
  at::Tensor y;
  if (rms_) {
    y = x * at::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + epsilon_) * as_compute(weight_);
  } else {
    y = at::layer_norm(x, {x.size(-1)}, as_compute(weight_), as_compute(bias_), epsilon_);
  }
  return y.scalar_type() == input.scalar_type() ? y : y.to(input.scalar_type());
}

at::Tensor NormImpl::forward_inference(const at::Tensor& input) const {
  if (rms_ && kernels::decode_kernels_supported(input) && weight_.scalar_type() == input.scalar_type()) {
    return kernels::rms_norm(input, weight_, epsilon_);
  }
  return forward(input);
}

}  // namespace graphed::model
