// model/mlp.cpp — see model/mlp.h.
#include "graphed/model/mlp.h"

#include "graphed/kernels/training_ops.h"
#include "graphed/model/norm.h"
#include "graphed/util/error.h"

namespace graphed::model {

at::Tensor mlp_activation(const at::Tensor& fc1_output, bool swiglu, bool openai_gelu) {
  if (!swiglu) return openai_gelu ? at::gelu(fc1_output, "tanh") : at::gelu(fc1_output);
  return kernels::reference::swiglu(fc1_output);
}

MlpImpl::MlpImpl(const MlpShape& shape) : shape_(shape) {
  const int64_t fc1_out = shape.swiglu ? 2 * shape.ffn_hidden_size : shape.ffn_hidden_size;
  fc1_weight_ = register_parameter("fc1_weight", at::randn({fc1_out, shape.hidden_size}) * shape.init_std);
  fc2_weight_ =
      register_parameter("fc2_weight", at::randn({shape.hidden_size, shape.ffn_hidden_size}) * shape.output_init_std);
  if (shape.bias) {
    fc1_bias_ = register_parameter("fc1_bias", at::zeros({fc1_out}));
    fc2_bias_ = register_parameter("fc2_bias", at::zeros({shape.hidden_size}));
  }
}

void MlpImpl::split_for_tensor_parallel(const TensorParallel& tensor) {
  GRAPHED_INTERNAL_ASSERT(tensor_.size() == 1, "an MLP split twice");
  tensor_ = tensor;
  keep_own_shards(*this, tensor_splits(), tensor.shard());
}

std::vector<std::pair<std::string, ParameterSplit>> MlpImpl::tensor_splits() const {
  const ParameterSplit fc1{shape_.swiglu ? TensorSplit::kSwiglu : TensorSplit::kColumn};
  std::vector<std::pair<std::string, ParameterSplit>> splits = {{"fc1_weight", fc1},
                                                                {"fc2_weight", {TensorSplit::kRow}}};
  if (fc1_bias_.defined()) {
    splits.emplace_back("fc1_bias", fc1);
    splits.emplace_back("fc2_bias", ParameterSplit{TensorSplit::kFirstRank});
  }
  return splits;
}

at::Tensor MlpImpl::forward(const at::Tensor& input) {
  return activate_and_project(path_->linear(tensor_.enter(input), fc1_weight_, fc1_bias_));
}

NormedLinear MlpImpl::forward_from_stream(const at::Tensor& hidden, const NormImpl& norm) {
  if (tensor_.size() > 1) {  // the norm's output enters the tensor region first
    const kernels::NormedStream input = norm.forward_stream(hidden);
    return {input.stream, forward(input.normed)};
  }
  const NormedLinear projected = norm.stream_then_linear(hidden, fc1_weight_, fc1_bias_);
  return {projected.stream, activate_and_project(projected.output)};
}

at::Tensor MlpImpl::activate_and_project(const at::Tensor& projected) {
  const at::Tensor bias = tensor_.on_first_rank(fc2_bias_);
  if (shape_.swiglu) return tensor_.leave(path_->swiglu_linear(projected, fc2_weight_, bias));
  return tensor_.leave(path_->linear(mlp_activation(projected, false, shape_.openai_gelu), fc2_weight_, bias));
}

at::Tensor MlpImpl::forward_inference(const at::Tensor& hidden, const NormImpl& norm) {
  const at::Tensor projected = norm.then_linear(hidden, fc1_weight_, fc1_bias_);
  // Row-parallel fc2: the bias and the residual go in once, on the first rank, before the ranks' sum.
  const at::Tensor bias = tensor_.on_first_rank(fc2_bias_);
  const at::Tensor residual = tensor_.on_first_rank(hidden);
  if (shape_.swiglu) {  // SwiGLU is fc2's input transform: the path may fuse them
    kernels::LinearInput first;
    first.transform = kernels::RowTransform::kSwiglu;
    return tensor_.leave(path_->decode_linear(projected, fc2_weight_, bias, first, residual));
  }
  const at::Tensor activated = mlp_activation(projected, false, shape_.openai_gelu);
  return tensor_.leave(path_->decode_linear(activated, fc2_weight_, bias, {}, residual));
}

}  // namespace graphed::model
