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
  /// The same norm for inference (KernelPath::inference_norm: a fused kernel where the path has one).
  at::Tensor forward_inference(const at::Tensor& input) const;
  /// linear(norm(input)) with weight [out, hidden] and bias [out] (may be undefined), for inference: an RMSNorm
  /// is the linear's input transform (KernelPath::decode_linear, which may fuse them), a LayerNorm runs first.
  at::Tensor then_linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) const;
  /// The kernels the norm runs (model/kernel_path.h).
  void use_kernel_path(std::shared_ptr<const KernelPath> path) { path_ = std::move(path); }

 private:
  bool rms_;
  double epsilon_;
  at::Tensor weight_;
  at::Tensor bias_;
  std::shared_ptr<const KernelPath> path_ = aten_path();
};
TORCH_MODULE(Norm);

}  // namespace graphed::model
