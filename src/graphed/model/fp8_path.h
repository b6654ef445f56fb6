// model/fp8_path.h — the FP8 training path (issue 28; Megatron's --fp8-format): the linears of the layers
// that run it are kernels/fp8_linear.h's FP8 GEMMs over the fused path's bf16 working copies; norms, RoPE,
// SwiGLU, the residuals and the output layer with its loss stay the fused path's (bf16), as in Megatron.
// Delayed scaling keeps one slot per scaled tensor and moves the scales on after every optimizer step.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "graphed/kernels/fp8_linear.h"
#include "graphed/kernels/fp8_scaling.h"
#include "graphed/model/fused_path.h"

namespace graphed::model {

class Fp8Path final : public KernelPath {
 public:
  struct Options {
    kernels::Fp8LinearRecipe recipe;
    std::optional<kernels::DelayedScaling> delayed;  ///< unset: current (per-tensor) scaling
  };

  /// weights: the master weights of the linears this path may run (each gets its slots, in this order).
  Fp8Path(std::shared_ptr<const FusedPath> fused, const std::vector<at::Tensor>& weights, const Options& options,
          const at::Device& device);

  at::Tensor linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) const override;
  at::Tensor inference_linear(const at::Tensor& input, const at::Tensor& weight,
                              const at::Tensor& bias) const override {
    return linear(input, weight, bias);
  }
  at::Tensor decode_linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                           const kernels::LinearInput& first, const at::Tensor& residual) const override {
    return fused_->decode_linear(input, weight, bias, first, residual);
  }
  bool decode_kernels() const override { return fused_->decode_kernels(); }
  at::Tensor norm(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                  double epsilon) const override {
    return fused_->norm(input, weight, bias, epsilon);
  }
  kernels::NormedStream residual_norm(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& bias,
                                      double epsilon) const override {
    return fused_->residual_norm(hidden, weight, bias, epsilon);
  }
  at::Tensor rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) const override {
    return fused_->rope(x, cos, sin);
  }
  at::Tensor swiglu(const at::Tensor& x) const override { return fused_->swiglu(x); }
  at::Tensor residual_add(const at::Tensor& hidden, const at::Tensor& update) const override {
    return fused_->residual_add(hidden, update);
  }
  at::Tensor logits(const at::Tensor& normed, const at::Tensor& weight) const override {
    return fused_->logits(normed, weight);
  }
  bool fuses_output_loss() const override { return fused_->fuses_output_loss(); }
  at::Tensor linear_cross_entropy(const at::Tensor& normed, const at::Tensor& weight,
                                  const at::Tensor& labels) const override {
    return fused_->linear_cross_entropy(normed, weight, labels);
  }

  /// Delayed scaling: the next step's scales from this step's amaxes; nothing for current scaling.
  void end_step() const override;

  /// The delayed-scaling tensors by checkpoint name (fp8.forward.amax_history, fp8.forward.scale, ...,
  /// fp8.backward_e5m2.scale in the hybrid format); empty for current scaling. Loading copies into them in place.
  std::vector<std::pair<std::string, at::Tensor>> state() const;

 private:
  kernels::Fp8LinearScaling scaling_of(const at::Tensor& weight) const;

  std::shared_ptr<const FusedPath> fused_;
  kernels::Fp8LinearRecipe recipe_;
  std::shared_ptr<kernels::Fp8ScalingState> forward_;   ///< E4M3: input and weight of each linear
  std::shared_ptr<kernels::Fp8ScalingState> backward_;  ///< the output's gradient of each linear
  std::unordered_map<const void*, int64_t> slots_;      ///< by the master weight's TensorImpl
};

}  // namespace graphed::model
