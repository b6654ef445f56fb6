// kernels/detail/norm_steps.h — the fused norm's statistics and backward as plain functions over tensors, for
// the autograd functions that run a norm: the norms of training_ops_cuda.cpp and the FP8 norm-linear of
// fp8_linear_cuda.cpp, whose norm writes E4M3 (kernels/fp8_linear.h). CUDA builds only.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

namespace graphed::kernels::detail {

/// What a norm's backward reads: its input (contiguous), fp32 weight and bias (empty for RMSNorm), and the
/// per-row statistics its forward wrote (mean is rstd itself for RMSNorm, which has none).
struct NormSaved {
  at::Tensor input, weight, mean, rstd, bias;
};

/// input made contiguous and empty statistics for its rows, for a forward kernel to fill.
NormSaved norm_statistics(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias);

/// {input, weight, bias} gradients for grad_output (bf16), the input's plus `residual` where that is defined
/// (the stream's own gradient). Where `accumulate` and the parameters' .grad take it, the weight's and bias's
/// gradients are added into .grad in place (the listeners hear of it) and come back undefined.
torch::autograd::tensor_list norm_backward(const NormSaved& saved, const at::Tensor& grad_output,
                                           const at::Tensor& residual, bool accumulate);

}  // namespace graphed::kernels::detail
