// kernels/fp8_linear.h — a linear layer whose three GEMMs (forward, input gradient, weight gradient) run on
// Hopper's FP8 tensor cores through cuBLASLt (LibTorch's _scaled_mm): the input, the weight and the output's
// gradient are cast to FP8 with one scale each, per tensor (the weight once a step, by its caller). The scales
// are current (from the tensor's own amax, Megatron's --fp8-recipe tensorwise) or delayed (from the amax history
// of kernels/fp8_scaling.h, --fp8-recipe delayed). Everything stays on the device, so eager steps and graph
// replays give the same bits. The input's producer (a norm, SwiGLU) may be fused into its cast.
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

/// The per-tensor scaled FP8 form of a tensor: data (one byte a value), the fp32 [1] inverse scale that
/// multiplies it back (16-byte aligned, as cuBLASLt wants it), and, for a matrix whose transpose a backward
/// GEMM reads, data's transpose, contiguous.
struct Fp8Tensor {
  at::Tensor data;
  at::Tensor scale_inverse;
  at::Tensor transposed;  ///< [columns, rows]; undefined unless asked for
};

/// What a cast does to its input first, in the same kernel: nothing, or SwiGLU (the input is [..., 2 w] and
/// the cast is of silu(first half) * second half [..., w], rounded to bf16 as kernels::swiglu writes it).
enum class Fp8InputTransform { kNone, kSwiglu };

/// The delayed slots of a linear's input and of its output's gradient; the weight's scale travels with its
/// cast (Fp8Tensor).
struct Fp8LinearScaling {
  Fp8Slot input;
  Fp8Slot gradient;  ///< the output's gradient (E5M2 in the hybrid format)
};

/// Whether `device` has FP8 tensor cores that this build can drive (a CUDA build, compute capability 8.9
/// or more: Ada, Hopper and later); when not, why, naming the device.
bool fp8_supported(const at::Device& device, std::string* why_not = nullptr);

/// transform(input) [..., in] (bf16) times the weight's E4M3 cast [out, in] (with its transpose, which the
/// backward reads), transposed, plus the bias's working copy: bf16 [..., out]. The backward gives the master
/// weight (fp32) its gradient, added to .grad in place where `accumulate_in_place` (telling
/// kernels/accumulation_listeners.h), and the input its gradient through the transform. Sizes: in and out
/// multiples of 16, and the rows (the product of input's leading sizes) too when the weight gradient is FP8;
/// SwiGLU only with an FP8 weight gradient. Where `record_amax`, a delayed input slot records the amax of the
/// input here and the gradient's slot that of the output's gradient in the backward (a training step; not an
/// evaluation, nor a graph's warmup probe, whose amaxes would be counted twice).
at::Tensor fp8_linear(const at::Tensor& input, const at::Tensor& weight, const Fp8Tensor& weight_fp8,
                      const at::Tensor& bias, const at::Tensor& bias_copy, const Fp8LinearRecipe& recipe,
                      const Fp8LinearScaling& scaling, bool accumulate_in_place, bool record_amax,
                      Fp8InputTransform transform = Fp8InputTransform::kNone);

/// kernels::residual_norm followed by fp8_linear of the norm, in one: RMSNorm (norm_bias undefined) or LayerNorm of
/// hidden [..., in] (fp32 or bf16) with fp32 weights, written by the norm's kernel straight in E4M3 at the input
/// slot's delayed scale (TransformerEngine's LayerNormLinear), never in bf16. `stream` is residual_norm's: the
/// branch adds its update to it, and its gradient joins the norm's in the norm's backward kernel.
struct Fp8NormLinear {
  at::Tensor stream;
  at::Tensor output;
};
/// Whether fp8_norm_linear takes these: delayed scaling with an FP8 weight gradient, CUDA tensors the fused norm
/// takes, and rows and in multiples of 16.
bool fp8_norm_linear_fits(const at::Tensor& hidden, const at::Tensor& norm_weight, const at::Tensor& norm_bias,
                          const Fp8LinearRecipe& recipe, const Fp8LinearScaling& scaling);
Fp8NormLinear fp8_norm_linear(const at::Tensor& hidden, const at::Tensor& norm_weight, const at::Tensor& norm_bias,
                              double epsilon, const at::Tensor& weight, const Fp8Tensor& weight_fp8,
                              const at::Tensor& bias, const at::Tensor& bias_copy, const Fp8LinearRecipe& recipe,
                              const Fp8LinearScaling& scaling, bool accumulate_in_place, bool record_amax);

/// The FP8 form of transform(x) (x bf16 or fp32 on a GPU; bf16 for SwiGLU), with `transpose` (a matrix) its
/// transpose too, written by the same kernel. Current scaling when `slot` is undefined; else the slot's
/// scale, recording the amax in the slot when `record`.
Fp8Tensor quantize_fp8(const at::Tensor& x, Fp8Format format, const Fp8Slot& slot = {}, bool record = false,
                       bool transpose = false, Fp8InputTransform transform = Fp8InputTransform::kNone);

/// quantize_fp8 of a matrix into the tensors of `into` (data and transposed of its shapes and format, a [1]
/// fp32 scale_inverse), in place: casts made once and read by every step's graphs at the same addresses.
void quantize_fp8_into(const at::Tensor& x, Fp8Format format, const Fp8Slot& slot, bool record, const Fp8Tensor& into);

/// Empty tensors for quantize_fp8_into of a matrix like `like` (with its transpose).
Fp8Tensor empty_fp8_matrix(const at::Tensor& like, Fp8Format format);

}  // namespace graphed::kernels
