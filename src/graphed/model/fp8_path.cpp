// model/fp8_path.cpp — see model/fp8_path.h.
#include "graphed/model/fp8_path.h"

#include <ATen/core/grad_mode.h>

#include "graphed/capture/capture_state.h"
#include "graphed/util/error.h"

namespace graphed::model {

Fp8Path::Fp8Path(std::shared_ptr<const FusedPath> fused, const std::vector<at::Tensor>& weights, const Options& options,
                 const at::Device& device)
    : WrappedPath(fused), fused_(std::move(fused)), recipe_(options.recipe) {
  for (const auto& weight : weights) slots_.emplace(weight.unsafeGetTensorImpl(), static_cast<int64_t>(slots_.size()));
  if (options.delayed && !slots_.empty()) {
    const auto count = static_cast<int64_t>(slots_.size());
    forward_ =
        std::make_shared<kernels::Fp8ScalingState>(2 * count, kernels::Fp8Format::kE4M3, *options.delayed, device);
    backward_ =
        std::make_shared<kernels::Fp8ScalingState>(count, options.recipe.gradient_format, *options.delayed, device);
  }
}

kernels::Fp8LinearScaling Fp8Path::scaling_of(const at::Tensor& weight) const {
  if (forward_ == nullptr) return {};
  const auto found = slots_.find(weight.unsafeGetTensorImpl());
  GRAPHED_INTERNAL_ASSERT(found != slots_.end(), "an FP8 linear whose weight has no delayed-scaling slot");
  const int64_t index = found->second;
  return {kernels::slot_of(*forward_, 2 * index), kernels::slot_of(*forward_, 2 * index + 1),
          kernels::slot_of(*backward_, index)};
}

at::Tensor Fp8Path::linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) const {
  // Without autograd a few rows (a training sample's tokens) take the bf16 GEMM: the FP8 ones are sized for
  // multiples of 16 (training's rows are checked by rule FP-4).
  const int64_t rows = input.size(-1) > 0 ? input.numel() / input.size(-1) : 0;
  if (!at::GradMode::is_enabled() && rows % 16 != 0) return fused_->linear(input, weight, bias);
  // Amaxes count once per training pass: not in evaluation, nor in a per-layer engine's warmup probe.
  const bool record = at::GradMode::is_enabled() && !capture::is_gradient_probe();
  return kernels::fp8_linear(input, weight, fused_->copy_of(weight), bias, fused_->copy_of(bias), recipe_,
                             scaling_of(weight), fused_->accumulates_in_place(), record);
}

void Fp8Path::end_step() const {
  if (forward_ == nullptr) return;
  forward_->update();
  backward_->update();
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
