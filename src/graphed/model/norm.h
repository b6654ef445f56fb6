// model/norm.h — LayerNorm or RMSNorm (--normalization), computed in fp32 and returned in the
// input's dtype (on the fused path: one kernel, returned in the path's activation type). RMSNorm is
// written out: LibTorch 1.13 has no rms_norm op.
#pragma once

#include <memory>

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "graphed/model/kernel_path.h"

namespace graphed::model {

class NormImpl : public torch::nn::Module {
 public:
  /// rms: RMSNorm (weight only) instead of LayerNorm (weight and bias).
  NormImpl(int64_t hidden_size, bool rms, double epsilon);
  at::Tensor forward(const at::Tensor& input) const;  // [..., hidden] -> [..., hidden]
  /// The residual stream `hidden` and its norm (KernelPath::residual_norm): the branch this norm feeds adds
  /// its update to the returned stream.
  kernels::NormedStream forward_stream(const at::Tensor& hidden) const;
  /// forward_stream(hidden) and linear(normed, weight, bias) in one (KernelPath::norm_linear): the stream, and
  /// the linear's output.
  NormedLinear stream_then_linear(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& bias) const;
  /// The same norm for decoding: RMSNorm of a bf16 CUDA tensor through one fused kernel
  /// (kernels/decode_ops.h), anything else through forward().
  at::Tensor forward_inference(const at::Tensor& input) const;
  /// linear(norm(input)) with weight [out, hidden] and bias [out] (may be undefined), for decoding: RMSNorm
  /// of a bf16 CUDA tensor folds into the linear's kernel (kernels::decode_linear), anything else runs
  /// forward_inference first.
  at::Tensor then_linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) const;
  /// The kernels the norm runs (model/kernel_path.h).
  void use_kernel_path(std::shared_ptr<const KernelPath> path) { path_ = std::move(path); }

 private:
  /// RMSNorm of a bf16 CUDA input with weights of its dtype on a path with decode kernels.
  bool takes_decode_kernels(const at::Tensor& input) const;

  bool rms_;
  double epsilon_;
  at::Tensor weight_;
  at::Tensor bias_;
  std::shared_ptr<const KernelPath> path_ = aten_path();
};
TORCH_MODULE(Norm);

}  // namespace graphed::model
