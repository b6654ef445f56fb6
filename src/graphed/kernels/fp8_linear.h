// kernels/fp8_linear.h — a linear layer whose three GEMMs (forward, input gradient, weight gradient) run on
// Hopper's FP8 tensor cores through cuBLASLt (LibTorch's _scaled_mm): the input, the weight and the output's
// gradient are cast to FP8 with one scale each, per tensor. The scales are current (from the tensor's own
// amax, Megatron's --fp8-recipe tensorwise) or delayed (from the amax history of kernels/fp8_scaling.h,
// --fp8-recipe delayed). Everything stays on the device, so eager steps and graph replays give the same bits.
#pragma once

#include <string>

#include <ATen/ATen.h>

#include "graphed/kernels/fp8_scaling.h"

namespace graphed::kernels {

/// Megatron's --fp8-format and --no-fp8-wgrad: the forward's tensors are E4M3; the output's gradient is
/// E4M3 too (e4m3) or E5M2 (hybrid). Without fp8_weight_gradient the weight's gradient is a bf16 GEMM.
struct Fp8LinearRecipe {
  Fp8Format gradient_format = Fp8Format::kE4M3;
  bool fp8_weight_gradient = true;
};

/// A linear's three scaled tensors.
struct Fp8LinearScaling {
  Fp8Slot input;
  Fp8Slot weight;
  Fp8Slot gradient;  ///< the output's gradient (E5M2 in the hybrid format)
};

/// Whether `device` has FP8 tensor cores that this build can drive (a CUDA build, compute capability 8.9
/// or more: Ada, Hopper and later); when not, why, naming the device.
bool fp8_supported(const at::Device& device, std::string* why_not = nullptr);

/// input [..., in] (bf16) times the weight's working copy [out, in] (bf16), transposed, plus the bias's copy:
/// bf16 [..., out]. The backward gives the master weight (fp32) its gradient, added to .grad in place where
/// `accumulate_in_place` (telling kernels/accumulation_listeners.h). Sizes: in and out multiples of 16, and
/// the rows (the product of input's leading sizes) too when the weight gradient is FP8. Where `record_amax`,
/// delayed slots record the amaxes of the input and weight here and of the output's gradient in the backward
/// (a training step; not an evaluation, nor a graph's warmup probe, whose amaxes would be counted twice).
at::Tensor fp8_linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& weight_copy,
                      const at::Tensor& bias, const at::Tensor& bias_copy, const Fp8LinearRecipe& recipe,
                      const Fp8LinearScaling& scaling, bool accumulate_in_place, bool record_amax);

/// The per-tensor scaled FP8 form of x (bf16 or fp32, on a GPU): data (one byte a value, x's shape) and the
/// fp32 [1] inverse scale that multiplies it back; with `transpose` (x a matrix) also data's transpose,
/// contiguous, written by the same kernel. Current scaling when `slot` is undefined; else the slot's scale,
/// recording x's amax in the slot when `record`.
struct Fp8Tensor {
  at::Tensor data;
  at::Tensor scale_inverse;
  at::Tensor transposed;  ///< [columns, rows]; undefined unless asked for
};
Fp8Tensor quantize_fp8(const at::Tensor& x, Fp8Format format, const Fp8Slot& slot = {}, bool record = false,
                       bool transpose = false);

}  // namespace graphed::kernels
