// kernels/decode_kernels.cu — see kernels/decode_kernels.h. Simple, latency-minded kernels: a decode
// step moves little data per launch, so what matters is one launch instead of many. fp32 arithmetic,
// one rounding to bf16 per output.
#include "graphed/kernels/decode_kernels.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "graphed/kernels/detail/bf16_vectors.cuh"
#include "graphed/kernels/detail/block_reduce.cuh"
#include "graphed/kernels/detail/launch_check.h"
#include "graphed/kernels/detail/programmatic_launch.cuh"

namespace graphed::kernels {
namespace {

using detail::block_reduce;
using detail::load_eight;
using detail::store_eight;

constexpr int kThreads = 256;

constexpr int kNormVectors = 4;  // eight-value vectors a thread keeps in registers: rows up to 8,192 wide

/// One block per row. Rows of up to kThreads x 8 x kNormVectors columns, 16-byte aligned, are read once
/// into registers; others take the scalar loop.
__global__ void rms_norm_kernel(const __nv_bfloat16* input, const __nv_bfloat16* weight, __nv_bfloat16* output,
                                int columns, float epsilon) {
  __shared__ float scratch[32];
  const __nv_bfloat16* x = input + static_cast<int64_t>(blockIdx.x) * columns;
  __nv_bfloat16* y = output + static_cast<int64_t>(blockIdx.x) * columns;
  const bool aligned = reinterpret_cast<uintptr_t>(input) % 16 == 0 && reinterpret_cast<uintptr_t>(weight) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(output) % 16 == 0;
  if (aligned && columns % 8 == 0 && columns <= kThreads * 8 * kNormVectors) {
    float values[kNormVectors][8];
    float squares = 0.0f;
#pragma unroll
    for (int v = 0; v < kNormVectors; ++v) {
      const int i = (threadIdx.x + v * kThreads) * 8;
      if (i >= columns) continue;
      load_eight(x + i, values[v]);
#pragma unroll
      for (int e = 0; e < 8; ++e) squares += values[v][e] * values[v][e];
    }
    const float scale = rsqrtf(block_reduce<false>(squares, scratch) / static_cast<float>(columns) + epsilon);
#pragma unroll
    for (int v = 0; v < kNormVectors; ++v) {
      const int i = (threadIdx.x + v * kThreads) * 8;
      if (i >= columns) continue;
      float scales[8];
      load_eight(weight + i, scales);
#pragma unroll
      for (int e = 0; e < 8; ++e) values[v][e] = values[v][e] * scale * scales[e];
      store_eight(y + i, values[v]);
    }
    return;
  }
  float squares = 0.0f;
  for (int i = threadIdx.x; i < columns; i += blockDim.x) {
    const float value = __bfloat162float(x[i]);
    squares += value * value;
  }
  const float scale = rsqrtf(block_reduce<false>(squares, scratch) / static_cast<float>(columns) + epsilon);
  for (int i = threadIdx.x; i < columns; i += blockDim.x) {
    y[i] = __float2bfloat16(__bfloat162float(x[i]) * scale * __bfloat162float(weight[i]));
  }
}

/// One block per token over its head slots: slots [0, heads) are queries, then keys, then values; the keys and
/// values go to the paged caches [cache rows, groups, head_dim], row cache_rows[token]. (A block per (token, slot)
/// of head_dim / 2 threads was 17 us at 256 tokens on an H200: 12,288 one-warp blocks.)
__global__ void rope_into_paged_cache_kernel(const __nv_bfloat16* qkv, const int64_t* positions,
                                             const int64_t* cache_rows, const __nv_bfloat16* cos,
                                             const __nv_bfloat16* sin, __nv_bfloat16* query, __nv_bfloat16* key_cache,
                                             __nv_bfloat16* value_cache, int heads, int groups, int head_dim) {
  detail::wait_for_previous_kernel();
  detail::let_next_kernel_start();
  const int slots = heads + 2 * groups;
  const int half = head_dim / 2;
  const int64_t token = blockIdx.x;
  const int64_t position = positions[token];
  const int64_t cache_row = cache_rows[token];
  // A block per token: thread i takes value pair (slot, i % half) of i = thread, thread + blockDim, ..., so that a
  // warp reads and writes whole head rows.
  for (int index = threadIdx.x; index < slots * half; index += blockDim.x) {
    const int slot = index / half;
    const int i = index % half;
    const __nv_bfloat16* source = qkv + (token * slots + slot) * head_dim;
    __nv_bfloat16* target;
    if (slot < heads) {
      target = query + (token * heads + slot) * head_dim;
    } else {
      const bool is_key = slot < heads + groups;
      const int group = is_key ? slot - heads : slot - heads - groups;
      target = (is_key ? key_cache : value_cache) + (cache_row * groups + group) * head_dim;
    }
    if (cos != nullptr && slot < heads + groups) {
      const float first = __bfloat162float(source[i]);
      const float second = __bfloat162float(source[i + half]);
      const float c = __bfloat162float(cos[position * half + i]);
      const float s = __bfloat162float(sin[position * half + i]);
      target[i] = __float2bfloat16(first * c - second * s);
      target[i + half] = __float2bfloat16(second * c + first * s);
    } else {
      target[i] = source[i];
      target[i + half] = source[i + half];
    }
  }
}

/// output = silu(gate) * up, eight values a thread through 16-byte loads (rows of a multiple of eight).
__global__ void silu_and_mul_eight_kernel(const __nv_bfloat16* input, __nv_bfloat16* output, int64_t rows,
                                          int64_t width) {
  const int64_t vectors = width / 8;
  const int64_t total = rows * vectors;
  for (int64_t index = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; index < total;
       index += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = index / vectors;
    const int64_t column = (index % vectors) * 8;
    float gate[8], up[8], result[8];
    load_eight(input + row * 2 * width + column, gate);
    load_eight(input + row * 2 * width + width + column, up);
#pragma unroll
    for (int e = 0; e < 8; ++e) result[e] = gate[e] / (1.0f + __expf(-gate[e])) * up[e];
    detail::store_eight(output + row * width + column, result);
  }
}

__global__ void silu_and_mul_kernel(const __nv_bfloat16* input, __nv_bfloat16* output, int64_t rows, int64_t width) {
  const int64_t total = rows * width;
  for (int64_t index = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; index < total;
       index += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = index / width;
    const int64_t column = index % width;
    const float gate = __bfloat162float(input[row * 2 * width + column]);
    const float up = __bfloat162float(input[row * 2 * width + width + column]);
    output[index] = __float2bfloat16(gate / (1.0f + __expf(-gate)) * up);
  }
}

cudaStream_t as_stream(void* stream) { return static_cast<cudaStream_t>(stream); }

}  // namespace

void launch_rms_norm(const void* input, const void* weight, void* output, int64_t rows, int64_t columns, float epsilon,
                     void* stream) {
  rms_norm_kernel<<<static_cast<unsigned>(rows), kThreads, 0, as_stream(stream)>>>(
      static_cast<const __nv_bfloat16*>(input), static_cast<const __nv_bfloat16*>(weight),
      static_cast<__nv_bfloat16*>(output), static_cast<int>(columns), epsilon);
  detail::check_launch("rms_norm_kernel");
}

void launch_rope_into_paged_cache(const void* qkv, const int64_t* positions, const int64_t* cache_rows, const void* cos,
                                  const void* sin, void* query, void* key_cache, void* value_cache, int64_t tokens,
                                  int64_t heads, int64_t groups, int64_t head_dim, void* stream) {
  const auto blocks = static_cast<unsigned>(tokens);
  const int threads = 256;
  detail::launch_programmatic("rope_into_paged_cache_kernel", rope_into_paged_cache_kernel, dim3(blocks), dim3(threads),
                              0, as_stream(stream), static_cast<const __nv_bfloat16*>(qkv), positions, cache_rows,
                              static_cast<const __nv_bfloat16*>(cos), static_cast<const __nv_bfloat16*>(sin),
                              static_cast<__nv_bfloat16*>(query), static_cast<__nv_bfloat16*>(key_cache),
                              static_cast<__nv_bfloat16*>(value_cache), static_cast<int>(heads),
                              static_cast<int>(groups), static_cast<int>(head_dim));
}

void launch_silu_and_mul(const void* input, void* output, int64_t rows, int64_t width, void* stream) {
  const bool aligned =
      width % 8 == 0 && reinterpret_cast<uintptr_t>(input) % 16 == 0 && reinterpret_cast<uintptr_t>(output) % 16 == 0;
  if (aligned) {
    const int64_t total = rows * width / 8;
    const auto blocks = static_cast<unsigned>(total / kThreads + 1 < 4096 ? total / kThreads + 1 : 4096);
    silu_and_mul_eight_kernel<<<blocks, kThreads, 0, as_stream(stream)>>>(
        static_cast<const __nv_bfloat16*>(input), static_cast<__nv_bfloat16*>(output), rows, width);
    detail::check_launch("silu_and_mul_eight_kernel");
    return;
  }
  const int64_t total = rows * width;
  const auto blocks = static_cast<unsigned>(total / kThreads + 1 < 1024 ? total / kThreads + 1 : 1024);
  silu_and_mul_kernel<<<blocks, kThreads, 0, as_stream(stream)>>>(static_cast<const __nv_bfloat16*>(input),
                                                                  static_cast<__nv_bfloat16*>(output), rows, width);
  detail::check_launch("silu_and_mul_kernel");
}

}  // namespace graphed::kernels
