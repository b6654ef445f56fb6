// kernels/grouped_gemm.h — every expert's GEMM in one launch, with each expert's rows found on the device: the
// rows of `a` are sorted by expert and offsets[e]..offsets[e+1] are expert e's (a device array, so the launch's
// shape never depends on how tokens were routed, and a CUDA graph replays it for any routing). One kernel per
// product an MoE's experts need: the forward and the input's gradient (rows times each expert's matrix, or its
// transpose) and the weights' gradient (each expert's rows transposed times its rows' gradients). Tiles of 64 x 64
// accumulate in fp32 (tensor cores for bf16 and fp16), in a fixed order: the same bits on every run, with no
// atomics. Free of ATen (kernels/grouped_gemm_ops.h is its face); a launch that fails throws graphed::Error.
#pragma once

#include <cstdint>

namespace graphed::kernels {

enum class GemmType { kFloat32, kBFloat16, kFloat16 };

/// The shapes of one grouped launch. Every matrix is contiguous, of `type`; offsets: experts + 1 int64 on the
/// device, offsets[0] = 0 and offsets[experts] = rows.
struct GroupedGemmShape {
  int64_t rows = 0;     ///< M: every expert's rows together
  int64_t depth = 0;    ///< K: the reduced dimension of the row products
  int64_t columns = 0;  ///< N: the output's columns
  int64_t experts = 0;
  GemmType type = GemmType::kFloat32;
};

/// out [M, N] = for each expert e and row r of e: a[r, :] [K] times b_e, where b_e is b[e] [K, N], or with
/// transpose_b b[e]ᵀ (b [E, N, K]: the input's gradient through the weights).
void launch_grouped_rows_gemm(const void* a, const void* b, const int64_t* offsets, void* out,
                              const GroupedGemmShape& shape, bool transpose_b, void* stream);

/// out [E, K, N] = for each expert e: a[rows of e]ᵀ [K, rows] times g[rows of e] [rows, N] (the weights'
/// gradient; zero for an expert without rows). a [M, K], g [M, N].
void launch_grouped_weights_gemm(const void* a, const void* g, const int64_t* offsets, void* out,
                                 const GroupedGemmShape& shape, void* stream);

}  // namespace graphed::kernels
