// kernels/fp8_kernels.h — the CUDA kernels behind FP8 linears (kernels/fp8_linear.h) and FP8 weights
// (kernels/fp8_weights.h), free of ATen like kernels/training_kernels.h: the amax of a tensor, and its cast to E4M3
// or E5M2 after a scale read from the device (so a graph replays with the scale of the moment), recording the amax
// as it goes. SwiGLU's output can be cast by the kernel that computes it, and a norm's by the norm's kernel
// (norm_kernels.cu), without a bf16 copy. A launch that fails throws graphed::Error (kernels/detail/launch_check.h).
#pragma once

#include <cstdint>

#include "graphed/kernels/training_kernels.h"

namespace graphed::kernels {

/// Raises *amax (fp32 on the device, >= 0) to max |input| over `count` values of `input_type`. Atomic:
/// the order of the blocks does not change the result.
void launch_amax(const void* input, Element input_type, int64_t count, float* amax, void* stream);

/// output[i] = fp8(input[i] * *scale), saturating at the format's largest finite value (E5M2 when `e5m2`,
/// else E4M3); one byte per value. Where amax is not null, also raises *amax to max |input| (before the
/// scale), as launch_amax does.
void launch_cast_to_fp8(const void* input, Element input_type, int64_t count, const float* scale, void* output,
                        bool e5m2, float* amax, void* stream);

/// launch_cast_to_fp8 of a row-major [rows, columns] matrix that also writes its transpose [columns, rows]
/// (the column-major operand an FP8 GEMM of the backward reads) from the same read of the input. Only where
/// cast_transpose_fits(rows, columns): both multiples of 4; output and transposed 4-byte aligned.
bool cast_transpose_fits(int64_t rows, int64_t columns);
void launch_cast_transpose_to_fp8(const void* input, Element input_type, int64_t rows, int64_t columns,
                                  const float* scale, void* output, void* transposed, bool e5m2, float* amax,
                                  void* stream);

/// launch_cast_transpose_to_fp8 of SwiGLU's output, fused: the matrix cast is silu(input[:, :columns]) *
/// input[:, columns:] for a bf16 input [rows, 2 columns], each value rounded to bf16 as launch_swiglu_forward
/// writes it (so the bytes equal that kernel's output cast). transposed may be null: the cast alone. Where
/// cast_transpose_fits(rows, columns).
void launch_swiglu_cast_transpose_to_fp8(const void* input, int64_t rows, int64_t columns, const float* scale,
                                         void* output, void* transposed, bool e5m2, float* amax, void* stream);
/// launch_amax of that SwiGLU output (current scaling's first pass), without writing it.
void launch_swiglu_amax(const void* input, int64_t rows, int64_t columns, float* amax, void* stream);

/// launch_norm_forward (kernels/training_kernels.h) writing E4M3 at *scale instead of bf16: each value is
/// rounded to bf16 first, so the bytes equal the bf16 output's cast, and raises *amax (may be null) to the
/// largest |value| as that cast would. The norm of an FP8 linear's input, never written in bf16.
void launch_norm_forward_to_fp8(const void* input, Element input_type, const float* weight, const float* bias,
                                const float* scale, void* output, float* amax, float* mean, float* rstd, int64_t rows,
                                int64_t columns, float epsilon, void* stream);

/// transposed [columns, rows] = input [rows, columns], one byte a value (an FP8 matrix's column-major form),
/// through 64 x 64 tiles in shared memory. Where cast_transpose_fits(rows, columns).
void launch_transpose_fp8(const void* input, int64_t rows, int64_t columns, void* transposed, void* stream);

/// Each row of a row-major [rows, columns] matrix in E4M3 with a scale of its own (per token for activations,
/// per output channel for weights): output[r, c] = fp8(input[r, c] * largest / amax(row r)), and
/// scale_inverse[r] (fp32) = the factor that multiplies row r back. columns a multiple of 4; output 4-byte aligned.
void launch_cast_rows_to_fp8(const void* input, Element input_type, int64_t rows, int64_t columns, float largest,
                             void* output, float* scale_inverse, void* stream);

/// Current scaling in one thread: *scale = largest / *amax where that amax is finite and above 0 (else 1;
/// an infinite quotient becomes the largest float), *scale_inverse = 1 / *scale.
void launch_scale_from_amax(const float* amax, float largest, float* scale, float* scale_inverse, void* stream);

/// Whether this binary holds the cast kernels for the current device (nvcc built them for the first
/// architecture of TORCH_CUDA_ARCH_LIST only, 9.0a by default).
bool fp8_kernels_built_for_current_device();

}  // namespace graphed::kernels
