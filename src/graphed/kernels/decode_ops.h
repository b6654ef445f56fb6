// kernels/decode_ops.h — the ATen face of kernels/decode_kernels.h: checks shapes, dtypes and
// contiguity, allocates outputs, launches on the current stream. decode_kernels_supported() says
// whether a call can take this path at all (a CUDA build, a CUDA bf16 tensor); elsewhere the model
// keeps its LibTorch ops. Graph-capturable: no host sync, no allocation outside the caching allocator.
#pragma once

#include <ATen/ATen.h>

namespace graphed::kernels {

/// Whether the fused decode kernels run on tensors like `like` (CUDA build, CUDA device, bf16).
bool decode_kernels_supported(const at::Tensor& like);

/// RMSNorm over the last dimension: input [..., columns], weight [columns].
at::Tensor rms_norm(const at::Tensor& input, const at::Tensor& weight, double epsilon);

/// qkv [rows, (heads + 2 groups) head_dim] of one token per row at positions [rows] (int64): returns
/// the queries [rows, heads, head_dim], rotated by cos/sin [positions, head_dim / 2] (undefined: no
/// rotary embedding); writes the rotated keys and the values into the caches [rows, groups, L, head_dim].
at::Tensor rope_into_cache(const at::Tensor& qkv, const at::Tensor& positions, const at::Tensor& cos,
                           const at::Tensor& sin, const at::Tensor& key_cache, const at::Tensor& value_cache,
                           int64_t heads, int64_t groups, int64_t head_dim);

/// Attention of queries [rows, heads, head_dim] over cache slots 0..positions[r]: [rows, heads, head_dim].
at::Tensor decode_attention(const at::Tensor& query, const at::Tensor& key_cache, const at::Tensor& value_cache,
                            const at::Tensor& positions, double scale);

/// Whether decode_attention takes caches of this length and heads of this size.
bool decode_attention_fits(int64_t cache_length, int64_t head_dim);

/// input [..., in] weight [out, in]^T + bias: through the one-row kernel for a single row of a bf16 CUDA
/// input (a batch-1 decode step), else at::linear.
at::Tensor decode_linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias);

/// silu(first half) * second half of input [..., 2 width]: [..., width].
at::Tensor silu_and_mul(const at::Tensor& input);

}  // namespace graphed::kernels
