// model/mlp.h — the dense MLP (fc1 -> GELU or SwiGLU -> fc2), also used as the MoE shared expert.
// Dropout and the residual are the transformer layer's; forward_from_stream takes the layer's norm (so a
// path may fuse it with fc1), and decoding takes the norm and adds the residual, so that the kernels fold them in.
#pragma once

#include <memory>

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "graphed/model/kernel_path.h"
#include "graphed/model/tensor_parallel.h"

namespace graphed::model {

class NormImpl;

struct MlpShape {
  int64_t hidden_size = 0;
  int64_t ffn_hidden_size = 0;
  bool swiglu = false;
  bool bias = true;
  double init_std = 0.02;         ///< fc1
  double output_init_std = 0.02;  ///< fc2 (Megatron scales it by 1/sqrt(2 x layers))
  bool openai_gelu = false;       ///< GELU's tanh approximation (--openai-gelu); no effect with swiglu
};

class MlpImpl : public torch::nn::Module {
 public:
  explicit MlpImpl(const MlpShape& shape);
  at::Tensor forward(const at::Tensor& input);  // [..., hidden] -> [..., hidden]
  /// The stream and forward(norm(hidden)) (a training step's): the norm and fc1 in one call to the path where
  /// nothing stands between them (one tensor-parallel rank), so the path may fuse them.
  NormedLinear forward_from_stream(const at::Tensor& hidden, const NormImpl& norm);
  /// Inference: the residual stream after this MLP, hidden + mlp(norm(hidden)), as two of the path's
  /// decode_linear calls: norm + fc1, then the activation + fc2 + the residual (one kernel each on the decode
  /// kernels' path, model/decode_kernel_path.h).
  at::Tensor forward_inference(const at::Tensor& hidden, const NormImpl& norm);
  /// The kernels the MLP runs (model/kernel_path.h).
  void use_kernel_path(std::shared_ptr<const KernelPath> path) { path_ = std::move(path); }
  /// Keeps this rank's part of `tensor`'s group (Megatron: fc1 column-parallel, SwiGLU's halves split
  /// alike; fc2 row-parallel with its bias on the first rank). Once; the ffn size must divide by the size.
  void split_for_tensor_parallel(const TensorParallel& tensor);
  /// How each parameter (by its name in this module) lies over the tensor-parallel ranks.
  std::vector<std::pair<std::string, ParameterSplit>> tensor_splits() const;

 private:
  /// The activation and fc2 of fc1's output (forward's second half).
  at::Tensor activate_and_project(const at::Tensor& projected);

  MlpShape shape_;
  TensorParallel tensor_;
  at::Tensor fc1_weight_, fc1_bias_, fc2_weight_, fc2_bias_;
  std::shared_ptr<const KernelPath> path_ = aten_path();
};
TORCH_MODULE(Mlp);

/// GELU (exact, Megatron's default; with openai_gelu the tanh approximation, GPT-2's gelu_new) or
/// SwiGLU on a [..., 2 x ffn] input: silu(first half) * second half (openai_gelu has no effect then).
at::Tensor mlp_activation(const at::Tensor& fc1_output, bool swiglu, bool openai_gelu = false);

}  // namespace graphed::model
