// kernels/decode_kernels.h — fused CUDA kernels for one decode step of a bf16 model, free of ATen:
// pointers, sizes and a stream, as llm.c writes them, so they compile wherever nvcc exists. Each does
// in one launch what LibTorch does in several: RMSNorm, RoPE with the key/value cache write, SwiGLU, attention
// of one query token over a short cache (the projections are kernels/row_linear.h; longer caches take
// kernels/paged_attention.h's split kernels). Tensors are
// contiguous, row-major, bf16 unless noted; `stream` is a cudaStream_t. The ATen-facing wrappers are
// kernels/decode_ops.h.
#pragma once

#include <cstdint>

namespace graphed::kernels {

/// output[r, :] = input[r, :] * rsqrt(mean(input[r, :]^2) + epsilon) * weight, in fp32, rounded once.
void launch_rms_norm(const void* input, const void* weight, void* output, int64_t rows, int64_t columns, float epsilon,
                     void* stream);

/// From qkv [rows, (heads + 2 groups) head_dim] (the QKV projection of one token per row): the queries,
/// rotated at positions[r] (int64) by cos/sin [positions, head_dim / 2] (bf16; null for no rotary
/// embedding), into query [rows, heads, head_dim]; the keys, rotated likewise, and the values into the
/// caches. cache_rows null: caches [rows, groups, cache_length, head_dim], slot positions[r] of row r;
/// else paged caches [cache rows, groups, head_dim] (cache_length unused), cache row cache_rows[r] (int64).
/// A programmatic dependent launch (kernels/detail/programmatic_launch.cuh).
void launch_rope_into_cache(const void* qkv, const int64_t* positions, const int64_t* cache_rows, const void* cos,
                            const void* sin, void* query, void* key_cache, void* value_cache, int64_t rows,
                            int64_t heads, int64_t groups, int64_t head_dim, int64_t cache_length, void* stream);

/// output [rows, heads, head_dim] = softmax(scale q k^T) v of each query [rows, heads, head_dim] over
/// the cache slots 0..positions[r] of its group (head h reads group h / (heads / groups)).
/// cache_length <= max_decode_attention_length(); head_dim a multiple of 8, at most 256.
void launch_decode_attention(const void* query, const void* key_cache, const void* value_cache,
                             const int64_t* positions, void* output, int64_t rows, int64_t heads, int64_t groups,
                             int64_t head_dim, int64_t cache_length, float scale, void* stream);

/// The longest cache launch_decode_attention takes (its scores live in shared memory; beyond it, one block a
/// head would leave most of the GPU idle, and the split kernels are faster).
int64_t max_decode_attention_length();

/// output [rows, width] = silu(input[:, :width]) * input[:, width:] for input [rows, 2 width].
void launch_silu_and_mul(const void* input, void* output, int64_t rows, int64_t width, void* stream);

}  // namespace graphed::kernels
