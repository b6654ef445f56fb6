// kernels/detail/block_reduce.cuh — warp and block reductions shared by the .cu files of kernels/: fp32,
// in a fixed order (the same bits from run to run), through 32 floats of shared scratch, and the softmax
// step built on them.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace graphed::kernels::detail {

__device__ __forceinline__ float warp_sum(float value) {
  for (int offset = 16; offset > 0; offset >>= 1) value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

__device__ __forceinline__ float warp_max(float value) {
  for (int offset = 16; offset > 0; offset >>= 1) value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}

/// The sum (or max) over the block; every thread gets it. `scratch` holds 32 floats.
template <bool kMax>
__device__ __forceinline__ float block_reduce(float value, float* scratch) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int warps = (blockDim.x + 31) >> 5;
  value = kMax ? warp_max(value) : warp_sum(value);
  __syncthreads();  // scratch may still be read by a previous reduction
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  value = lane < warps ? scratch[lane] : (kMax ? -INFINITY : 0.0f);
  value = kMax ? warp_max(value) : warp_sum(value);
  return value;
}

/// One softmax step over a block: turns `scores[0, length)` into exp(score - max) in place and returns
/// (max, sum of the weights). Every thread gets both, and the weights are published to the block.
__device__ __forceinline__ float2 block_exponentiate(float* scores, int64_t length, float* scratch) {
  float largest = -INFINITY;
  for (int64_t j = threadIdx.x; j < length; j += blockDim.x) largest = fmaxf(largest, scores[j]);
  largest = block_reduce<true>(largest, scratch);
  float total = 0.0f;
  for (int64_t j = threadIdx.x; j < length; j += blockDim.x) {
    const float weight = __expf(scores[j] - largest);
    scores[j] = weight;
    total += weight;
  }
  total = block_reduce<false>(total, scratch);  // its leading __syncthreads also publishes the weights
  return make_float2(largest, total);
}

}  // namespace graphed::kernels::detail
