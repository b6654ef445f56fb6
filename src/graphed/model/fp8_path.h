// model/fp8_path.h — the FP8 training path (issue 28; Megatron's --fp8-format): the linears of the layers
// that run it are kernels/fp8_linear.h's FP8 GEMMs; the norms' arithmetic, RoPE, the residuals and the output
// layer with its loss stay the fused path's (bf16, through model/wrapped_path.h), as in Megatron. SwiGLU is
// computed inside the cast of the second MLP linear's input where the weight gradient is FP8; with delayed
// scaling the norms before the QKV and first MLP linears write their E4M3 output themselves. The weights are cast
// once a step, after the optimizer's update, into buffers every graph reads. Delayed scaling keeps one slot per
// scaled tensor and moves the scales on after every optimizer step.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "graphed/kernels/fp8_linear.h"
#include "graphed/kernels/fp8_scaling.h"
#include "graphed/model/fused_path.h"
#include "graphed/model/wrapped_path.h"

namespace graphed::model {

class Fp8Path final : public WrappedPath {
 public:
  struct Options {
    kernels::Fp8LinearRecipe recipe;
    std::optional<kernels::DelayedScaling> delayed;  ///< unset: current (per-tensor) scaling
    /// Delayed scaling over several ranks: replaces a row of amaxes (fp32, on the device) in place by its
    /// element-wise max over every rank that holds the same slots, the data- and tensor-parallel ranks of
    /// one pipeline stage (TransformerEngine's amax reduction). It may run inside a graph. Unset: one rank.
    std::function<void(at::Tensor&)> reduce_amaxes;
  };

  /// weights: the master weights of the linears this path may run (each gets its slots, in this order).
  Fp8Path(std::shared_ptr<const FusedPath> fused, const std::vector<at::Tensor>& weights, const Options& options,
          const at::Device& device);

  at::Tensor linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) const override;
  /// The norm written in E4M3 by its kernel, then the FP8 linear (a training step with delayed scaling and an FP8
  /// weight gradient, where kernels::fp8_norm_linear_fits; else the norm and linear apart).
  NormedLinear norm_linear(const at::Tensor& hidden, const at::Tensor& norm_weight, const at::Tensor& norm_bias,
                           double epsilon, const at::Tensor& weight, const at::Tensor& bias) const override;
  /// The SwiGLU of x cast to FP8 in one kernel, then the FP8 linear (where a training step's FP8 weight
  /// gradient reads the cast; else SwiGLU and linear apart).
  at::Tensor swiglu_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) const override;
  at::Tensor inference_linear(const at::Tensor& input, const at::Tensor& weight,
                              const at::Tensor& bias) const override {
    return linear(input, weight, bias);
  }

  /// Delayed scaling: the next step's scales from this step's amaxes (the ranks' max, where reduce_amaxes is
  /// set). Then the weights' casts for the next step.
  void end_step() const override;
  /// The weights' casts again, from the working copies as loaded.
  void weights_loaded() const override;

  /// The delayed-scaling tensors by checkpoint name (fp8.forward.amax_history, fp8.forward.scale, ...,
  /// fp8.backward_e5m2.scale in the hybrid format); empty for current scaling. Loading copies into them in place.
  std::vector<std::pair<std::string, at::Tensor>> state() const;

 private:
  /// One FP8 linear's weight: its bf16 working copy and the E4M3 cast made from it once a step.
  struct CastWeight {
    at::Tensor copy;
    kernels::Fp8Tensor cast;
  };

  int64_t slot_index(const at::Tensor& weight) const;
  kernels::Fp8LinearScaling scaling_of(int64_t index) const;
  at::Tensor fp8_linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                        kernels::Fp8InputTransform transform) const;
  /// Every weight's cast, in place, at the weight slots' scales (recording their amaxes).
  void cast_weights() const;

  std::shared_ptr<const FusedPath> fused_;
  kernels::Fp8LinearRecipe recipe_;
  std::shared_ptr<kernels::Fp8ScalingState> forward_;   ///< E4M3: input and weight of each linear
  std::shared_ptr<kernels::Fp8ScalingState> backward_;  ///< the output's gradient of each linear
  std::function<void(at::Tensor&)> reduce_amaxes_;
  std::unordered_map<const void*, int64_t> slots_;  ///< by the master weight's TensorImpl
  std::vector<CastWeight> weights_;                 ///< by slot index
};

}  // namespace graphed::model
