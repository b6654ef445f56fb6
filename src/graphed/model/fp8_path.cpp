// model/fp8_path.cpp — see model/fp8_path.h.
#include "graphed/model/fp8_path.h"

#include <ATen/core/grad_mode.h>

#include "graphed/capture/capture_state.h"
#include "graphed/util/error.h"

namespace graphed::model {

Fp8Path::Fp8Path(std::shared_ptr<const FusedPath> fused, const std::vector<at::Tensor>& weights, const Options& options,
                 const at::Device& device)
    : WrappedPath(fused), fused_(std::move(fused)), recipe_(options.recipe), reduce_amaxes_(options.reduce_amaxes) {
  for (const auto& weight : weights) {
    slots_.emplace(weight.unsafeGetTensorImpl(), static_cast<int64_t>(weights_.size()));
    const at::Tensor copy = fused_->copy_of(weight);
    GRAPHED_INTERNAL_ASSERT(copy.defined() && copy.dim() == 2, "an FP8 weight without a bf16 working copy");
    weights_.push_back({copy, kernels::empty_fp8_matrix(copy, kernels::Fp8Format::kE4M3)});
  }
  if (options.delayed && !slots_.empty()) {
    const auto count = static_cast<int64_t>(slots_.size());
    forward_ =
        std::make_shared<kernels::Fp8ScalingState>(2 * count, kernels::Fp8Format::kE4M3, *options.delayed, device);
    backward_ =
        std::make_shared<kernels::Fp8ScalingState>(count, options.recipe.gradient_format, *options.delayed, device);
  }
  cast_weights();
}

int64_t Fp8Path::slot_index(const at::Tensor& weight) const {
  const auto found = slots_.find(weight.unsafeGetTensorImpl());
  GRAPHED_INTERNAL_ASSERT(found != slots_.end(), "an FP8 linear whose weight the FP8 path was not given");
  return found->second;
}

kernels::Fp8LinearScaling Fp8Path::scaling_of(int64_t index) const {
  if (forward_ == nullptr) return {};
  return {kernels::slot_of(*forward_, 2 * index), kernels::slot_of(*backward_, index)};
}

void Fp8Path::cast_weights() const {
  for (std::size_t index = 0; index < weights_.size(); ++index) {
    const kernels::Fp8Slot slot =
        forward_ == nullptr ? kernels::Fp8Slot{} : kernels::slot_of(*forward_, 2 * static_cast<int64_t>(index) + 1);
    kernels::quantize_fp8_into(weights_[index].copy, kernels::Fp8Format::kE4M3, slot, /*record=*/true,
                               weights_[index].cast);
  }
}

namespace {

/// Without autograd a few rows (a training sample's tokens) take bf16: the FP8 GEMMs are sized for multiples
/// of 16 (training's rows are checked by rule FP-4).
bool rows_fit(const at::Tensor& input) {
  const int64_t rows = input.size(-1) > 0 ? input.numel() / input.size(-1) : 0;
  return at::GradMode::is_enabled() || rows % 16 == 0;
}

/// Amaxes count once per training pass: not in evaluation, nor in a per-layer engine's warmup probe.
bool records_amaxes() { return at::GradMode::is_enabled() && !capture::is_gradient_probe(); }

}  // namespace

at::Tensor Fp8Path::fp8_linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                               kernels::Fp8InputTransform transform) const {
  const int64_t index = slot_index(weight);
  return kernels::fp8_linear(input, weight, weights_[index].cast, bias, fused_->copy_of(bias), recipe_,
                             scaling_of(index), fused_->accumulates_in_place(), records_amaxes(), transform);
}

at::Tensor Fp8Path::linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) const {
  if (!rows_fit(input)) return fused_->linear(input, weight, bias);
  return fp8_linear(input, weight, bias, kernels::Fp8InputTransform::kNone);
}

at::Tensor Fp8Path::swiglu_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) const {
  // The fused cast keeps no bf16 SwiGLU output, which a bf16 weight gradient (--no-fp8-wgrad) would read.
  if (!rows_fit(x) || !recipe_.fp8_weight_gradient || x.scalar_type() != at::kBFloat16) {
    return KernelPath::swiglu_linear(x, weight, bias);
  }
  return fp8_linear(x, weight, bias, kernels::Fp8InputTransform::kSwiglu);
}

NormedLinear Fp8Path::norm_linear(const at::Tensor& hidden, const at::Tensor& norm_weight, const at::Tensor& norm_bias,
                                  double epsilon, const at::Tensor& weight, const at::Tensor& bias) const {
  const int64_t index = slot_index(weight);
  const kernels::Fp8LinearScaling scaling = scaling_of(index);
  if (!at::GradMode::is_enabled() || !kernels::fp8_norm_linear_fits(hidden, norm_weight, norm_bias, recipe_, scaling)) {
    return KernelPath::norm_linear(hidden, norm_weight, norm_bias, epsilon, weight, bias);
  }
  const kernels::Fp8NormLinear result = kernels::fp8_norm_linear(
      hidden, norm_weight, norm_bias, epsilon, weight, weights_[index].cast, bias, fused_->copy_of(bias), recipe_,
      scaling, fused_->accumulates_in_place(), records_amaxes());
  return {result.stream, result.output};
}

void Fp8Path::end_step() const {
  if (forward_ != nullptr) {
    if (reduce_amaxes_) {  // this step's row of each history: the amaxes every rank recorded
      for (const auto& state : {forward_, backward_}) {
        at::Tensor recorded = state->amax_history().select(0, 0);
        reduce_amaxes_(recorded);
      }
    }
    forward_->update();
    backward_->update();
  }
  cast_weights();  // after the optimizer's update: the next step's weights, at the next step's scales
}

void Fp8Path::weights_loaded() const {
  // The amaxes the casts record only rise: this step's row forgets the weights it held before (the initial
  // ones, where no checkpoint state replaced the row) and takes the loaded weights'. Weights are the odd slots.
  if (forward_ != nullptr) forward_->amax_history().select(0, 0).slice(0, 1, c10::nullopt, 2).zero_();
  cast_weights();
}

std::vector<std::pair<std::string, at::Tensor>> Fp8Path::state() const {
  if (forward_ == nullptr) return {};
  // The gradients' format is in their names: an e4m3 run's scales never load into a hybrid run's.
  const std::string backward =
      backward_->format() == kernels::Fp8Format::kE5M2 ? "fp8.backward_e5m2." : "fp8.backward_e4m3.";
  return {{"fp8.forward.amax_history", forward_->amax_history()},
          {"fp8.forward.scale", forward_->scale()},
          {"fp8.forward.scale_inverse", forward_->scale_inverse()},
          {backward + "amax_history", backward_->amax_history()},
          {backward + "scale", backward_->scale()},
          {backward + "scale_inverse", backward_->scale_inverse()}};
}

}  // namespace graphed::model
