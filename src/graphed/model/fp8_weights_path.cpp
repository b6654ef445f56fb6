// model/fp8_weights_path.cpp — see model/fp8_weights_path.h.
#include "graphed/model/fp8_weights_path.h"

#include <utility>

#include "graphed/util/error.h"

namespace graphed::model {

Fp8WeightsPath::Fp8WeightsPath(std::shared_ptr<const KernelPath> base, const std::vector<at::Tensor>& weights)
    : WrappedPath(std::move(base)) {
  for (const auto& weight : weights) {
    if (!weight.defined() || !kernels::fp8_weight_fits(weight) || fp8_of(weight) != nullptr) continue;
    kernels::Fp8Weight fp8 = kernels::quantize_weight_fp8(weight.detach());
    fp8_bytes_ += fp8.data.numel() + fp8.scale.numel() * 4;
    replaced_bytes_ += weight.numel() * weight.element_size();
    weights_.emplace(weight.unsafeGetTensorImpl(), std::move(fp8));
  }
}

const kernels::Fp8Weight* Fp8WeightsPath::fp8_of(const at::Tensor& weight) const {
  const auto found = weights_.find(weight.unsafeGetTensorImpl());
  return found == weights_.end() ? nullptr : &found->second;
}

at::Tensor Fp8WeightsPath::linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) const {
  const kernels::Fp8Weight* fp8 = fp8_of(weight);
  return fp8 != nullptr ? kernels::fp8_weight_linear(input, *fp8, bias) : inner().linear(input, weight, bias);
}

at::Tensor Fp8WeightsPath::inference_linear(const at::Tensor& input, const at::Tensor& weight,
                                            const at::Tensor& bias) const {
  const kernels::Fp8Weight* fp8 = fp8_of(weight);
  return fp8 != nullptr ? kernels::fp8_weight_linear(input, *fp8, bias) : inner().inference_linear(input, weight, bias);
}

at::Tensor Fp8WeightsPath::decode_linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                                         const kernels::LinearInput& first, const at::Tensor& residual) const {
  const kernels::Fp8Weight* fp8 = fp8_of(weight);
  if (fp8 == nullptr) return inner().decode_linear(input, weight, bias, first, residual);
  return kernels::fp8_weight_linear(input, *fp8, bias, first, residual);
}

at::Tensor Fp8WeightsPath::logits(const at::Tensor& normed, const at::Tensor& weight) const {
  const kernels::Fp8Weight* fp8 = fp8_of(weight);
  if (fp8 == nullptr) return inner().logits(normed, weight);
  return kernels::fp8_weight_linear(normed, *fp8, {}).to(at::kFloat);
}

}  // namespace graphed::model
