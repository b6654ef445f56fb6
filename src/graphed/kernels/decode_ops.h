// kernels/decode_ops.h — the ATen face of kernels/decode_kernels.h and kernels/row_linear.h: checks shapes, dtypes
// and contiguity, allocates outputs, launches on the current stream. decode_kernels_supported() says
// whether a call can take this path at all (a CUDA build, a CUDA bf16 tensor); elsewhere the model
// keeps its LibTorch ops. Graph-capturable: no host sync, no allocation outside the caching allocator.
#pragma once

#include <ATen/ATen.h>

#include "graphed/kernels/row_linear.h"

namespace graphed::kernels {

/// Whether the fused decode kernels run on tensors like `like` (CUDA build, CUDA device, bf16).
bool decode_kernels_supported(const at::Tensor& like);

/// RMSNorm over the last dimension: input [..., columns], weight [columns].
at::Tensor rms_norm(const at::Tensor& input, const at::Tensor& weight, double epsilon);

/// qkv [tokens, (heads + 2 groups) head_dim] of a serving step's flat batch at positions [tokens] (int64):
/// returns the queries [tokens, heads, head_dim], rotated by cos/sin [positions, head_dim / 2] (undefined:
/// no rotary embedding); writes the rotated keys and the values into the paged caches [blocks, block size,
/// groups, head_dim] at cache_rows [tokens] (int64: block x block size + offset).
at::Tensor rope_into_paged_cache(const at::Tensor& qkv, const at::Tensor& positions, const at::Tensor& cache_rows,
                                 const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& key_cache,
                                 const at::Tensor& value_cache, int64_t heads, int64_t groups, int64_t head_dim);

/// What decode_linear applies to its input first. kRmsNorm and kSwiglu only where
/// decode_kernels_supported(input).
struct LinearInput {
  RowTransform transform = RowTransform::kNone;
  at::Tensor norm_weight;  ///< kRmsNorm: [in]
  double epsilon = 0.0;    ///< kRmsNorm
};

/// residual + (first(input) weight [out, in]^T + bias): input [..., in] ([..., 2 in] for kSwiglu),
/// residual [..., out]; bias and residual may be undefined. One kernels/row_linear.h launch for a bf16 CUDA
/// input of the rows and width it takes (a decode step's tokens); else the same steps unfused (rms_norm or
/// silu_and_mul, at::linear, the add).
at::Tensor decode_linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                         const LinearInput& first = {}, const at::Tensor& residual = {});

/// silu(first half) * second half of input [..., 2 width]: [..., width].
at::Tensor silu_and_mul(const at::Tensor& input);

/// first(input) as decode_linear applies it unfused: rms_norm, silu_and_mul, or the input itself.
at::Tensor transformed_input(const at::Tensor& input, const LinearInput& first);

/// Whether one kernels/row_linear.h launch takes decode_linear's tensors, for a weight [out, in] in bf16 or in
/// FP8 E4M3 rows (kernels/fp8_weights.h): bf16, contiguous and 16-byte aligned, rows and width as
/// row_linear_fits says. Always false on a CPU build.
bool row_linear_takes(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                      const LinearInput& first, const at::Tensor& residual);

/// That launch (where row_linear_takes): decode_linear's contract, the weight's rows scaled by weight_scale
/// [out] (fp32) where it is defined (FP8 rows).
at::Tensor row_linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& weight_scale,
                      const at::Tensor& bias, const LinearInput& first, const at::Tensor& residual);

}  // namespace graphed::kernels
