// kernels/detail/bf16_vectors.cuh — eight bf16 values through one 16-byte load or store, as floats:
// how the .cu files of kernels/ read and write bf16 rows at the memory's width.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace graphed::kernels::detail {

/// Eight bf16 values from 16 aligned bytes, as floats.
__device__ __forceinline__ void load_eight(const __nv_bfloat16* source, float* values) {
  const uint4 packed = *reinterpret_cast<const uint4*>(source);
  const __nv_bfloat162* pairs = reinterpret_cast<const __nv_bfloat162*>(&packed);
#pragma unroll
  for (int p = 0; p < 4; ++p) {
    const float2 pair = __bfloat1622float2(pairs[p]);
    values[2 * p] = pair.x;
    values[2 * p + 1] = pair.y;
  }
}

/// Stores eight floats as bf16 (rounded to nearest) into 16 aligned bytes.
__device__ __forceinline__ void store_eight(__nv_bfloat16* target, const float* values) {
  uint4 packed;
  __nv_bfloat162* pairs = reinterpret_cast<__nv_bfloat162*>(&packed);
#pragma unroll
  for (int p = 0; p < 4; ++p) pairs[p] = __floats2bfloat162_rn(values[2 * p], values[2 * p + 1]);
  *reinterpret_cast<uint4*>(target) = packed;
}

}  // namespace graphed::kernels::detail
