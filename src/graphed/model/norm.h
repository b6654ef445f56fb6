// model/norm.h — LayerNorm or RMSNorm (--normalization), computed in fp32 and returned in the
// input's dtype. RMSNorm is written out: LibTorch 1.13 has no rms_norm op.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

namespace graphed::model {

class NormImpl : public torch::nn::Module {
 public:
  /// rms: RMSNorm (weight only) instead of LayerNorm (weight and bias).
  NormImpl(int64_t hidden_size, bool rms, double epsilon);
  at::Tensor forward(const at::Tensor& input) const;  // [..., hidden] -> [..., hidden]
  /// The same norm for decoding: RMSNorm of a bf16 CUDA tensor through one fused kernel
  /// (kernels/decode_ops.h), anything else through forward().
  at::Tensor forward_inference(const at::Tensor& input) const;

 private:
  bool rms_;
  double epsilon_;
  at::Tensor weight_;
  at::Tensor bias_;
};
TORCH_MODULE(Norm);

}  // namespace graphed::model
