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
  return kernels::reference::norm(input, weight_, bias_, epsilon_, input.scalar_type());  // bias_ only for LayerNorm
}

at::Tensor NormImpl::forward_inference(const at::Tensor& input) const {
  if (rms_ && kernels::decode_kernels_supported(input) && weight_.scalar_type() == input.scalar_type()) {
    return kernels::rms_norm(input, weight_, epsilon_);
  }
  return forward(input);
}

}  // namespace graphed::model
