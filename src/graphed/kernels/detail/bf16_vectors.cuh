// kernels/detail/bf16_vectors.cuh — one fp32 or bf16 value, or eight bf16 values through one 16-byte load
// or store, as floats:
// how the .cu files of kernels/ read and write bf16 rows at the memory's width (and a dot product built
// on them that keeps eight loads in flight).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace graphed::kernels::detail {

/// One value of a row of fp32 or bf16, as a float.
__device__ __forceinline__ float load(const float* data, int64_t i) { return data[i]; }
__device__ __forceinline__ float load(const __nv_bfloat16* data, int64_t i) { return __bfloat162float(data[i]); }

/// Eight bf16 values held in 16 bytes (one load's worth), as floats.
__device__ __forceinline__ void unpack_eight(const uint4& packed, float* values) {
  const __nv_bfloat162* pairs = reinterpret_cast<const __nv_bfloat162*>(&packed);
#pragma unroll
  for (int p = 0; p < 4; ++p) {
    const float2 pair = __bfloat1622float2(pairs[p]);
    values[2 * p] = pair.x;
    values[2 * p + 1] = pair.y;
  }
}

/// Eight bf16 values from 16 aligned bytes, as floats.
__device__ __forceinline__ void load_eight(const __nv_bfloat16* source, float* values) {
  unpack_eight(*reinterpret_cast<const uint4*>(source), values);
}

/// Eight floats from 32 aligned bytes (the float32 form of the attention kernels).
__device__ __forceinline__ void load_eight(const float* source, float* values) {
  const float4 first = *reinterpret_cast<const float4*>(source);
  const float4 second = *reinterpret_cast<const float4*>(source + 4);
  values[0] = first.x, values[1] = first.y, values[2] = first.z, values[3] = first.w;
  values[4] = second.x, values[5] = second.y, values[6] = second.z, values[7] = second.w;
}

/// q . row over vectors x 8 values (q in fp32, row bf16 or fp32): the row's vectors loaded eight at a time
/// before the first is used, summed in order.
template <typename Scalar>
__device__ __forceinline__ float dot_eight_at_a_time(const Scalar* row, const float* q, int vectors) {
  float dot = 0.0f;
  for (int first = 0; first < vectors; first += 8) {
    float k[8][8];
#pragma unroll
    for (int c = 0; c < 8; ++c) {
      if (first + c < vectors) load_eight(row + (first + c) * 8, k[c]);
    }
#pragma unroll
    for (int c = 0; c < 8; ++c) {
      if (first + c >= vectors) break;
#pragma unroll
      for (int e = 0; e < 8; ++e) dot += q[(first + c) * 8 + e] * k[c][e];
    }
  }
  return dot;
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
