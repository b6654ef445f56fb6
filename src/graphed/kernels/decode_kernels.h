// kernels/decode_kernels.h — fused CUDA kernels for one decode step of a bf16 model, free of ATen:
// pointers, sizes and a stream, as llm.c writes them, so they compile wherever nvcc exists. Each does
// in one launch what LibTorch does in several: RMSNorm, RoPE with the paged key/value cache write, SwiGLU (the
// projections are kernels/row_linear.h, attention kernels/paged_attention.h). Tensors are
// contiguous, row-major, bf16 unless noted; `stream` is a cudaStream_t; a launch that fails throws graphed::Error
// (kernels/detail/launch_check.h). The ATen-facing wrappers are kernels/decode_ops.h.
#pragma once

#include <cstdint>

namespace graphed::kernels {

/// output[r, :] = input[r, :] * rsqrt(mean(input[r, :]^2) + epsilon) * weight, in fp32, rounded once.
void launch_rms_norm(const void* input, const void* weight, void* output, int64_t rows, int64_t columns, float epsilon,
                     void* stream);

/// From qkv [tokens, (heads + 2 groups) head_dim] (the QKV projection of a step's tokens): the queries,
/// rotated at positions[t] (int64) by cos/sin [positions, head_dim / 2] (bf16; null for no rotary
/// embedding), into query [tokens, heads, head_dim]; the keys, rotated likewise, and the values into the
/// paged caches [cache rows, groups, head_dim] at cache row cache_rows[t] (int64: block x block size +
/// offset). A programmatic dependent launch (kernels/detail/programmatic_launch.cuh).
void launch_rope_into_paged_cache(const void* qkv, const int64_t* positions, const int64_t* cache_rows, const void* cos,
                                  const void* sin, void* query, void* key_cache, void* value_cache, int64_t tokens,
                                  int64_t heads, int64_t groups, int64_t head_dim, void* stream);

/// output [rows, width] = silu(input[:, :width]) * input[:, width:] for input [rows, 2 width].
void launch_silu_and_mul(const void* input, void* output, int64_t rows, int64_t width, void* stream);

}  // namespace graphed::kernels
