// kernels/elementwise_kernels.cu — RoPE and SwiGLU forward and backward, and the residual add
// (kernels/training_kernels.h):
// two neighbouring bf16 values per thread step where the layout allows (one otherwise), fp32
// arithmetic rounded once to bf16. SwiGLU takes a block per row.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "graphed/kernels/detail/launch_check.h"
#include "graphed/kernels/detail/swiglu.cuh"
#include "graphed/kernels/training_kernels.h"

namespace graphed::kernels {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(int64_t work) {
  const int64_t blocks = (work + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65536 ? blocks : 65536);
}

/// Two bf16 values at `source` (4-byte aligned when kPairs), as floats; one when not kPairs.
template <bool kPairs>
__device__ __forceinline__ float2 load_two(const __nv_bfloat16* source) {
  if (kPairs) return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(source));
  return make_float2(__bfloat162float(source[0]), 0.0f);
}

template <bool kPairs>
__device__ __forceinline__ void store_two(__nv_bfloat16* target, float2 values) {
  if (kPairs) {
    *reinterpret_cast<__nv_bfloat162*>(target) = __floats2bfloat162_rn(values.x, values.y);
  } else {
    target[0] = __float2bfloat16_rn(values.x);
  }
}

/// Thread t rotates pairs (i, i + half) for kWidth consecutive i of one head row of one position.
template <bool kPairs>
__global__ void rope_kernel(const __nv_bfloat16* input, HeadStrides in, __nv_bfloat16* output, HeadStrides out,
                            const float* cos_table, const float* sin_table, int64_t sequence, int64_t heads,
                            int64_t half, int64_t work, float direction) {
  constexpr int kWidth = kPairs ? 2 : 1;
  const int64_t per_row = half / kWidth;
  for (int64_t index = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; index < work;
       index += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = index / per_row;  // (b, s, h) of the head row
    const int64_t i = (index - row * per_row) * kWidth;
    const int64_t h = row % heads;
    const int64_t s = (row / heads) % sequence;
    const int64_t b = row / (heads * sequence);
    const __nv_bfloat16* x = input + b * in.batch + s * in.sequence + h * in.head;
    __nv_bfloat16* y = output + b * out.batch + s * out.sequence + h * out.head;
    const float2 first = load_two<kPairs>(x + i);
    const float2 second = load_two<kPairs>(x + i + half);
    const float* c = cos_table + s * half + i;
    const float* n = sin_table + s * half + i;
    float2 rotated_first, rotated_second;
    rotated_first.x = first.x * c[0] - second.x * direction * n[0];
    rotated_second.x = second.x * c[0] + first.x * direction * n[0];
    if (kPairs) {
      rotated_first.y = first.y * c[1] - second.y * direction * n[1];
      rotated_second.y = second.y * c[1] + first.y * direction * n[1];
    }
    store_two<kPairs>(y + i, rotated_first);
    store_two<kPairs>(y + i + half, rotated_second);
  }
}

using detail::sigmoid;
using detail::swiglu;

/// A block per row; thread t takes kWidth consecutive columns at a time.
template <bool kPairs>
__global__ void swiglu_forward_kernel(const __nv_bfloat16* input, __nv_bfloat16* output, int64_t width) {
  constexpr int kWidth = kPairs ? 2 : 1;
  const __nv_bfloat16* gate_row = input + blockIdx.x * 2 * width;
  const __nv_bfloat16* up_row = gate_row + width;
  __nv_bfloat16* out_row = output + blockIdx.x * width;
  for (int64_t column = threadIdx.x * kWidth; column < width; column += blockDim.x * kWidth) {
    const float2 gate = load_two<kPairs>(gate_row + column);
    const float2 up = load_two<kPairs>(up_row + column);
    store_two<kPairs>(out_row + column, make_float2(swiglu(gate.x, up.x), swiglu(gate.y, up.y)));
  }
}

template <bool kPairs>
__global__ void swiglu_backward_kernel(const __nv_bfloat16* grad_output, const __nv_bfloat16* input,
                                       __nv_bfloat16* grad_input, int64_t width) {
  constexpr int kWidth = kPairs ? 2 : 1;
  const __nv_bfloat16* gate_row = input + blockIdx.x * 2 * width;
  const __nv_bfloat16* up_row = gate_row + width;
  const __nv_bfloat16* dy_row = grad_output + blockIdx.x * width;
  __nv_bfloat16* gate_grad = grad_input + blockIdx.x * 2 * width;
  __nv_bfloat16* up_grad = gate_grad + width;
  for (int64_t column = threadIdx.x * kWidth; column < width; column += blockDim.x * kWidth) {
    const float2 gate = load_two<kPairs>(gate_row + column);
    const float2 up = load_two<kPairs>(up_row + column);
    const float2 dy = load_two<kPairs>(dy_row + column);
    const float logistic_x = sigmoid(gate.x), logistic_y = sigmoid(gate.y);
    store_two<kPairs>(gate_grad + column,
                      make_float2(dy.x * up.x * logistic_x * (1.0f + gate.x * (1.0f - logistic_x)),
                                  dy.y * up.y * logistic_y * (1.0f + gate.y * (1.0f - logistic_y))));
    store_two<kPairs>(up_grad + column, make_float2(dy.x * gate.x * logistic_x, dy.y * gate.y * logistic_y));
  }
}

template <bool kQuads>
__global__ void residual_add_kernel(const float* hidden, const __nv_bfloat16* update, float* output, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  if (kQuads) {
    for (int64_t q = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; q < n / 4; q += stride) {
      float4 h = reinterpret_cast<const float4*>(hidden)[q];
      const uint2 packed = reinterpret_cast<const uint2*>(update)[q];
      const float2 first = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&packed.x));
      const float2 second = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&packed.y));
      h.x += first.x;
      h.y += first.y;
      h.z += second.x;
      h.w += second.y;
      reinterpret_cast<float4*>(output)[q] = h;
    }
  } else {
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += stride) {
      output[i] = hidden[i] + __bfloat162float(update[i]);
    }
  }
}

bool even_and_aligned(int64_t count, const void* a, const void* b, const void* c) {
  const auto aligned = [](const void* p) { return p == nullptr || reinterpret_cast<std::uintptr_t>(p) % 4 == 0; };
  return count % 2 == 0 && aligned(a) && aligned(b) && aligned(c);
}

}  // namespace

void launch_rope(const void* input, HeadStrides input_strides, void* output, HeadStrides output_strides,
                 const float* cos, const float* sin, int64_t batch, int64_t sequence, int64_t heads, int64_t head_dim,
                 bool inverse, void* stream) {
  const int64_t half = head_dim / 2;
  const int64_t rows = batch * sequence * heads;
  if (rows * half == 0) return;
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
  const float direction = inverse ? -1.0f : 1.0f;
  const auto* x = static_cast<const __nv_bfloat16*>(input);
  auto* y = static_cast<__nv_bfloat16*>(output);
  const bool even_strides = input_strides.batch % 2 == 0 && input_strides.sequence % 2 == 0 &&
                            input_strides.head % 2 == 0 && output_strides.batch % 2 == 0 &&
                            output_strides.sequence % 2 == 0 && output_strides.head % 2 == 0;
  if (even_strides && even_and_aligned(half, input, output, nullptr)) {
    rope_kernel<true><<<blocks_for(rows * half / 2), kThreads, 0, cuda_stream>>>(
        x, input_strides, y, output_strides, cos, sin, sequence, heads, half, rows * half / 2, direction);
  } else {
    rope_kernel<false><<<blocks_for(rows * half), kThreads, 0, cuda_stream>>>(
        x, input_strides, y, output_strides, cos, sin, sequence, heads, half, rows * half, direction);
  }
  detail::check_launch("rope_kernel");
}

void launch_residual_add(const float* hidden, const void* update, float* output, int64_t n, void* stream) {
  if (n == 0) return;
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
  const auto* u = static_cast<const __nv_bfloat16*>(update);
  const auto aligned = [](const void* p, std::uintptr_t bytes) {
    return reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
  };
  if (n % 4 == 0 && aligned(hidden, 16) && aligned(output, 16) && aligned(update, 8)) {
    residual_add_kernel<true><<<blocks_for(n / 4), kThreads, 0, cuda_stream>>>(hidden, u, output, n);
  } else {
    residual_add_kernel<false><<<blocks_for(n), kThreads, 0, cuda_stream>>>(hidden, u, output, n);
  }
  detail::check_launch("residual_add_kernel");
}

void launch_swiglu_forward(const void* input, void* output, int64_t rows, int64_t width, void* stream) {
  if (rows * width == 0) return;
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
  const auto* x = static_cast<const __nv_bfloat16*>(input);
  auto* y = static_cast<__nv_bfloat16*>(output);
  if (even_and_aligned(width, input, output, nullptr)) {
    swiglu_forward_kernel<true><<<static_cast<unsigned>(rows), kThreads, 0, cuda_stream>>>(x, y, width);
  } else {
    swiglu_forward_kernel<false><<<static_cast<unsigned>(rows), kThreads, 0, cuda_stream>>>(x, y, width);
  }
  detail::check_launch("swiglu_forward_kernel");
}

void launch_swiglu_backward(const void* grad_output, const void* input, void* grad_input, int64_t rows, int64_t width,
                            void* stream) {
  if (rows * width == 0) return;
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
  const auto* dy = static_cast<const __nv_bfloat16*>(grad_output);
  const auto* x = static_cast<const __nv_bfloat16*>(input);
  auto* dx = static_cast<__nv_bfloat16*>(grad_input);
  if (even_and_aligned(width, grad_output, input, grad_input)) {
    swiglu_backward_kernel<true><<<static_cast<unsigned>(rows), kThreads, 0, cuda_stream>>>(dy, x, dx, width);
  } else {
    swiglu_backward_kernel<false><<<static_cast<unsigned>(rows), kThreads, 0, cuda_stream>>>(dy, x, dx, width);
  }
  detail::check_launch("swiglu_backward_kernel");
}

}  // namespace graphed::kernels
