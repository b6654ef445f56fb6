// kernels/detail/element_types.cuh — what the .cu files of kernels/ that take fp32 or bf16 tensors share: reading and
// writing either as fp32, and picking the kernel instance for a pair of element types (kernels/training_kernels.h's
// Element) at launch.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "graphed/kernels/training_kernels.h"

namespace graphed::kernels::detail {

/// An element as fp32 (exact for both types).
template <typename T>
__device__ __forceinline__ float to_float(T value) {
  if constexpr (std::is_same_v<T, float>) {
    return value;
  } else {
    return __bfloat162float(value);
  }
}

/// fp32 as an element, rounded to nearest even for bf16.
template <typename T>
__device__ __forceinline__ T from_float(float value) {
  if constexpr (std::is_same_v<T, float>) {
    return value;
  } else {
    return __float2bfloat16_rn(value);
  }
}

template <typename A, typename B>
struct TypePair {
  using First = A;
  using Second = B;
};

/// Calls `launch` with TypePair<First, Second> of the kernels' element types.
template <typename Launch>
void with_types(Element first, Element second, Launch&& launch) {
  if (first == Element::kFloat32 && second == Element::kFloat32) {
    launch(TypePair<float, float>{});
  } else if (first == Element::kFloat32) {
    launch(TypePair<float, __nv_bfloat16>{});
  } else if (second == Element::kFloat32) {
    launch(TypePair<__nv_bfloat16, float>{});
  } else {
    launch(TypePair<__nv_bfloat16, __nv_bfloat16>{});
  }
}

/// Blocks of `per_block` to cover `count`.
inline unsigned blocks_of(int64_t count, int64_t per_block) {
  return static_cast<unsigned>((count + per_block - 1) / per_block);
}

inline cudaStream_t as_stream(void* stream) { return static_cast<cudaStream_t>(stream); }

}  // namespace graphed::kernels::detail
