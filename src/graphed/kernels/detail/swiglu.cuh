// kernels/detail/swiglu.cuh — SwiGLU's arithmetic in fp32, one definition for the training kernels that compute it
// (elementwise_kernels.cu) and the fused SwiGLU-to-FP8 cast of fp8_kernels.cu, so the fused cast reads exactly the
// bf16 values the plain kernel writes. The decode kernels (decode_kernels.cu, row_linear.cu) write their own.
#pragma once

#include <cuda_runtime.h>

namespace graphed::kernels::detail {

__device__ __forceinline__ float sigmoid(float value) { return 1.0f / (1.0f + __expf(-value)); }

/// silu(gate) * up.
__device__ __forceinline__ float swiglu(float gate, float up) { return gate * sigmoid(gate) * up; }

}  // namespace graphed::kernels::detail
