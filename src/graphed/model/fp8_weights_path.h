// model/fp8_weights_path.h — decoding with FP8 weights (--quantization fp8): a KernelPath over the model's
// own path that holds every linear weight it can as kernels/fp8_weights.h's E4M3 rows with a scale each, and
// runs those linears (a decode step's, a prefill's, the output layer's) on them; everything else (norms,
// attention, RoPE, the embedding lookup) is the wrapped path's (model/wrapped_path.h), in bf16.
#pragma once

#include <memory>
#include <unordered_map>
#include <vector>

#include <ATen/ATen.h>

#include "graphed/kernels/fp8_weights.h"
#include "graphed/model/wrapped_path.h"

namespace graphed::model {

class Fp8WeightsPath final : public WrappedPath {
 public:
  /// Casts each of `weights` that kernels::fp8_weight_fits to FP8 now; the others stay on `base`.
  Fp8WeightsPath(std::shared_ptr<const KernelPath> base, const std::vector<at::Tensor>& weights);

  /// How many weights are held in FP8, their bytes (values and scales), and the bytes of the weights they
  /// stand for (which a step no longer reads).
  int64_t fp8_weight_count() const { return static_cast<int64_t>(weights_.size()); }
  int64_t fp8_bytes() const { return fp8_bytes_; }
  int64_t replaced_bytes() const { return replaced_bytes_; }

  at::Tensor linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) const override;
  at::Tensor inference_linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) const override;
  at::Tensor decode_linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                           const kernels::LinearInput& first, const at::Tensor& residual) const override;
  at::Tensor logits(const at::Tensor& normed, const at::Tensor& weight) const override;

 private:
  const kernels::Fp8Weight* fp8_of(const at::Tensor& weight) const;

  std::unordered_map<const void*, kernels::Fp8Weight> weights_;  ///< by the bf16 weight's TensorImpl
  int64_t fp8_bytes_ = 0;
  int64_t replaced_bytes_ = 0;
};

}  // namespace graphed::model
