// kernels/fp8_weights.h — decoding with FP8 weights (issue 28's serving half, vLLM's --quantization fp8): each
// linear's weight is cast once to E4M3 with one scale per output row, halving the bytes a decode step reads.
// A step's few rows (up to kRowLinearMaxRows) take kernels/row_linear.h's kernel over the FP8 rows, activations
// in bf16; more rows (a prefill, a large serving batch) quantize each activation row too and run a rowwise
// scaled FP8 GEMM.
#pragma once

#include <ATen/ATen.h>

#include "graphed/kernels/decode_ops.h"

namespace graphed::kernels {

/// A weight [out, in] as E4M3 values and the fp32 scale [out] that multiplies each row back.
struct Fp8Weight {
  at::Tensor data;
  at::Tensor scale;
};

/// Whether a bf16 weight [out, in] on `device` can be held in FP8: both sizes multiples of 16 (the FP8 GEMM's
/// rule) on a device where kernels::fp8_supported holds.
bool fp8_weight_fits(const at::Tensor& weight);

/// The FP8 form of a bf16 or fp32 CUDA weight [out, in] (fp8_weight_fits), one scale per output row.
Fp8Weight quantize_weight_fp8(const at::Tensor& weight);

/// decode_linear's contract (residual + first(input) weight^T + bias, bf16) with the weight in FP8.
at::Tensor fp8_weight_linear(const at::Tensor& input, const Fp8Weight& weight, const at::Tensor& bias,
                             const LinearInput& first = {}, const at::Tensor& residual = {});

}  // namespace graphed::kernels
