// model/mlp.cpp — see model/mlp.h.
#include "graphed/model/mlp.h"

#include "graphed/kernels/decode_ops.h"
#include "graphed/kernels/training_ops.h"
#include "graphed/model/norm.h"

namespace graphed::model {

at::Tensor mlp_activation(const at::Tensor& fc1_output, bool swiglu, bool openai_gelu) {
  if (!swiglu) return openai_gelu ? at::gelu(fc1_output, "tanh") : at::gelu(fc1_output);
  return kernels::reference::swiglu(fc1_output);
}

MlpImpl::MlpImpl(const MlpShape& shape) : shape_(shape) {
  const int64_t fc1_out = shape.swiglu ? 2 * shape.ffn_hidden_size : shape.ffn_hidden_size;
  fc1_weight_ = register_parameter("fc1_weight", at::randn({fc1_out, shape.hidden_size}) * shape.init_std);
  fc2_weight_ = register_parameter("fc2_weight",
                                   at::randn({shape.hidden_size, shape.ffn_hidden_size}) * shape.output_init_std);
  if (shape.bias) {
    fc1_bias_ = register_parameter("fc1_bias", at::zeros({fc1_out}));
    fc2_bias_ = register_parameter("fc2_bias", at::zeros({shape.hidden_size}));
  }
}

at::Tensor MlpImpl::forward(const at::Tensor& input) {
  if (fused_) return fused_forward(input);
  const at::Tensor hidden = mlp_activation(at::linear(input, fc1_weight_, fc1_bias_), shape_.swiglu, shape_.openai_gelu);
  return at::linear(hidden, fc2_weight_, fc2_bias_);
}

at::Tensor MlpImpl::fused_forward(const at::Tensor& input) const {
  const FusedPath& fused = *fused_;
  const at::Tensor projected =
      kernels::linear(input, fc1_weight_, fused.copy_of(fc1_weight_), fc1_bias_, fused.copy_of(fc1_bias_));
  const at::Tensor hidden = shape_.swiglu ? kernels::swiglu(projected) : mlp_activation(projected, false, shape_.openai_gelu);
  return kernels::linear(hidden, fc2_weight_, fused.copy_of(fc2_weight_), fc2_bias_, fused.copy_of(fc2_bias_));
}

at::Tensor MlpImpl::forward_inference(const at::Tensor& hidden, const NormImpl& norm) {
  const at::Tensor projected = norm.then_linear(hidden, fc1_weight_, fc1_bias_);
  if (shape_.swiglu && kernels::decode_kernels_supported(projected)) {
    kernels::LinearInput first;
    first.transform = kernels::RowTransform::kSwiglu;
    return kernels::decode_linear(projected, fc2_weight_, fc2_bias_, first, hidden);
  }
  const at::Tensor activated = mlp_activation(projected, shape_.swiglu, shape_.openai_gelu);
  return kernels::decode_linear(activated, fc2_weight_, fc2_bias_, {}, hidden);
}

}  // namespace graphed::model
