// kernels/fp8_gemm.h — the FP8 weight-gradient GEMM that adds into an fp32 gradient inside the GEMM
// (cuBLASLt with beta = 1), as the bf16 path's addmm does, instead of writing a product and adding it after.
// CUDA builds only; kernels/fp8_linear_cuda.cpp is its one caller.
#pragma once

#include <ATen/ATen.h>

namespace graphed::kernels {

/// gradient [out, in] (fp32, contiguous) += (dy_transposed [out, rows] x scale_dy) times (x_transposed [in, rows]
/// x scale_x)^T, both operands FP8 (E4M3 or E5M2, not both E5M2) and row-major, the scales fp32 [1] on the
/// device. Returns false, having done nothing, where cuBLASLt is not in the process or offers no kernel for
/// these types and sizes; the caller then takes at::_scaled_mm and an add.
bool fp8_gemm_accumulate(const at::Tensor& dy_transposed, const at::Tensor& scale_dy, const at::Tensor& x_transposed,
                         const at::Tensor& scale_x, at::Tensor& gradient);

}  // namespace graphed::kernels
