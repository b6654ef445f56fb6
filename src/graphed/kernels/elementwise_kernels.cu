// kernels/elementwise_kernels.cu — RoPE and SwiGLU forward and backward (kernels/training_kernels.h):
// one thread per output pair or element, a grid-stride loop, fp32 arithmetic rounded once to bf16.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "graphed/kernels/training_kernels.h"

namespace graphed::kernels {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(int64_t work) {
  const int64_t blocks = (work + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65536 ? blocks : 65536);
}

__global__ void rope_kernel(const __nv_bfloat16* input, HeadStrides in, __nv_bfloat16* output, HeadStrides out,
                            const float* cos_table, const float* sin_table, int64_t sequence, int64_t heads,
                            int64_t half, int64_t pairs, float direction) {
  for (int64_t index = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; index < pairs;
       index += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = index % half;
    const int64_t h = (index / half) % heads;
    const int64_t s = (index / (half * heads)) % sequence;
    const int64_t b = index / (half * heads * sequence);
    const __nv_bfloat16* x = input + b * in.batch + s * in.sequence + h * in.head;
    __nv_bfloat16* y = output + b * out.batch + s * out.sequence + h * out.head;
    const float cosine = cos_table[s * half + i];
    const float sine = direction * sin_table[s * half + i];
    const float first = __bfloat162float(x[i]);
    const float second = __bfloat162float(x[i + half]);
    y[i] = __float2bfloat16_rn(first * cosine - second * sine);
    y[i + half] = __float2bfloat16_rn(second * cosine + first * sine);
  }
}

__device__ __forceinline__ float sigmoid(float value) { return 1.0f / (1.0f + __expf(-value)); }

__global__ void swiglu_forward_kernel(const __nv_bfloat16* input, __nv_bfloat16* output, int64_t rows, int64_t width) {
  const int64_t total = rows * width;
  for (int64_t index = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; index < total;
       index += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = index / width;
    const int64_t column = index % width;
    const float gate = __bfloat162float(input[row * 2 * width + column]);
    const float up = __bfloat162float(input[row * 2 * width + width + column]);
    output[index] = __float2bfloat16_rn(gate * sigmoid(gate) * up);
  }
}

__global__ void swiglu_backward_kernel(const __nv_bfloat16* grad_output, const __nv_bfloat16* input,
                                       __nv_bfloat16* grad_input, int64_t rows, int64_t width) {
  const int64_t total = rows * width;
  for (int64_t index = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; index < total;
       index += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = index / width;
    const int64_t column = index % width;
    const int64_t gate_index = row * 2 * width + column;
    const float gate = __bfloat162float(input[gate_index]);
    const float up = __bfloat162float(input[gate_index + width]);
    const float dy = __bfloat162float(grad_output[index]);
    const float logistic = sigmoid(gate);
    const float silu = gate * logistic;
    grad_input[gate_index] = __float2bfloat16_rn(dy * up * logistic * (1.0f + gate * (1.0f - logistic)));
    grad_input[gate_index + width] = __float2bfloat16_rn(dy * silu);
  }
}

}  // namespace

void launch_rope(const void* input, HeadStrides input_strides, void* output, HeadStrides output_strides,
                 const float* cos, const float* sin, int64_t batch, int64_t sequence, int64_t heads, int64_t head_dim,
                 bool inverse, void* stream) {
  const int64_t half = head_dim / 2;
  const int64_t pairs = batch * sequence * heads * half;
  if (pairs == 0) return;
  rope_kernel<<<blocks_for(pairs), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<const __nv_bfloat16*>(input), input_strides, static_cast<__nv_bfloat16*>(output), output_strides, cos,
      sin, sequence, heads, half, pairs, inverse ? -1.0f : 1.0f);
}

void launch_swiglu_forward(const void* input, void* output, int64_t rows, int64_t width, void* stream) {
  if (rows * width == 0) return;
  swiglu_forward_kernel<<<blocks_for(rows * width), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<const __nv_bfloat16*>(input), static_cast<__nv_bfloat16*>(output), rows, width);
}

void launch_swiglu_backward(const void* grad_output, const void* input, void* grad_input, int64_t rows, int64_t width,
                            void* stream) {
  if (rows * width == 0) return;
  swiglu_backward_kernel<<<blocks_for(rows * width), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<const __nv_bfloat16*>(grad_output), static_cast<const __nv_bfloat16*>(input),
      static_cast<__nv_bfloat16*>(grad_input), rows, width);
}

}  // namespace graphed::kernels
