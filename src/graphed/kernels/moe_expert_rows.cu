// kernels/moe_expert_rows.cu — see kernels/moe_expert_rows.h. The gathers give a block to a row (a token's or a
// sorted row's), its threads striding over the columns, so each output element is written by one thread and sums
// run in choice order; the bias's gradient gives a block to a (column tile, expert), a warp to each of 32 strided
// parts of the expert's rows, combined in part order.
#include "graphed/kernels/moe_expert_rows.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "graphed/kernels/detail/block_reduce.cuh"
#include "graphed/kernels/detail/element_types.cuh"
#include "graphed/kernels/detail/launch_check.h"

namespace graphed::kernels {
namespace {

using detail::as_stream;
using detail::block_reduce;
using detail::blocks_of;
using detail::from_float;
using detail::to_float;
using detail::with_types;

constexpr int kRowThreads = 128;  // a row's block

template <typename In, typename Out>
__global__ void __launch_bounds__(kRowThreads)
    permute_kernel(const In* __restrict__ tokens, const int64_t* __restrict__ order, Out* __restrict__ sorted,
                   int top_k, int64_t columns) {
  const int64_t row = blockIdx.x;
  const In* source = tokens + (order[row] / top_k) * columns;
  for (int64_t c = threadIdx.x; c < columns; c += kRowThreads)
    sorted[row * columns + c] = from_float<Out>(to_float(source[c]));
}

template <typename Grad, typename Out>
__global__ void __launch_bounds__(kRowThreads)
    permute_backward_kernel(const Grad* __restrict__ grad_sorted, const int64_t* __restrict__ destination,
                            Out* __restrict__ grad_tokens, int top_k, int64_t columns) {
  const int64_t token = blockIdx.x;
  for (int64_t c = threadIdx.x; c < columns; c += kRowThreads) {
    float sum = 0.0f;
    for (int j = 0; j < top_k; ++j) sum += to_float(grad_sorted[destination[token * top_k + j] * columns + c]);
    grad_tokens[token * columns + c] = from_float<Out>(sum);
  }
}

template <typename T>
__global__ void __launch_bounds__(kRowThreads)
    unpermute_kernel(const T* __restrict__ expert_output, const float* __restrict__ weights,
                     const int64_t* __restrict__ destination, T* __restrict__ out, int top_k, int64_t columns) {
  const int64_t token = blockIdx.x;
  for (int64_t c = threadIdx.x; c < columns; c += kRowThreads) {
    float sum = 0.0f;
    for (int j = 0; j < top_k; ++j) {
      const int64_t a = token * top_k + j;
      sum += weights[a] * to_float(expert_output[destination[a] * columns + c]);
    }
    out[token * columns + c] = from_float<T>(sum);
  }
}

template <typename T>
__global__ void __launch_bounds__(kRowThreads)
    unpermute_backward_kernel(const T* __restrict__ grad_out, const T* __restrict__ expert_output,
                              const float* __restrict__ weights, const int64_t* __restrict__ order,
                              T* __restrict__ grad_expert_output, float* __restrict__ grad_weights, int top_k,
                              int64_t columns) {
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const int64_t a = order[row];
  const T* incoming = grad_out + (a / top_k) * columns;
  const float weight = weights[a];
  float dot = 0.0f;
  for (int64_t c = threadIdx.x; c < columns; c += kRowThreads) {
    const float g = to_float(incoming[c]);
    grad_expert_output[row * columns + c] = from_float<T>(g * weight);
    dot += g * to_float(expert_output[row * columns + c]);
  }
  dot = block_reduce<false>(dot, scratch);
  if (threadIdx.x == 0) grad_weights[a] = dot;
}

/// The expert of a row: the first whose end lies past it (experts without rows share their end with the one before).
__device__ __forceinline__ int expert_of_row(const int64_t* offsets, int experts, int64_t row) {
  int low = 0, high = experts - 1;
  while (low < high) {
    const int middle = (low + high) / 2;
    if (offsets[middle + 1] > row) {
      high = middle;
    } else {
      low = middle + 1;
    }
  }
  return low;
}

constexpr float kInverseRootTwo = 0.70710678118654752f;
constexpr float kInverseRootTwoPi = 0.39894228040143268f;
constexpr float kRootTwoOverPi = 0.79788456080286536f;
constexpr float kGeluCubic = 0.044715f;

/// The activation of x (SwiGLU's gate) and its derivative.
__device__ __forceinline__ float2 activation_and_slope(float x, ExpertActivation activation) {
  switch (activation) {
    case ExpertActivation::kGelu: {
      const float cdf = 0.5f * (1.0f + erff(x * kInverseRootTwo));
      return make_float2(x * cdf, cdf + x * kInverseRootTwoPi * expf(-0.5f * x * x));
    }
    case ExpertActivation::kGeluTanh: {
      const float inner = kRootTwoOverPi * (x + kGeluCubic * x * x * x);
      const float t = tanhf(inner);
      const float slope =
          0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kRootTwoOverPi * (1.0f + 3.0f * kGeluCubic * x * x);
      return make_float2(0.5f * x * (1.0f + t), slope);
    }
    case ExpertActivation::kSwiglu: {
      const float sigmoid = 1.0f / (1.0f + expf(-x));
      return make_float2(x * sigmoid, sigmoid * (1.0f + x * (1.0f - sigmoid)));
    }
    default: return make_float2(x, 1.0f);
  }
}

template <typename In, typename Out>
__global__ void __launch_bounds__(kRowThreads)
    bias_activation_kernel(const In* __restrict__ hidden, const float* __restrict__ bias,
                           const int64_t* __restrict__ offsets, Out* __restrict__ out, int experts, int64_t columns,
                           ExpertActivation activation) {
  const int64_t row = blockIdx.x;
  const int expert = bias != nullptr ? expert_of_row(offsets, experts, row) : 0;
  const bool swiglu = activation == ExpertActivation::kSwiglu;
  const int64_t out_columns = swiglu ? columns / 2 : columns;
  const In* input = hidden + row * columns;
  const float* own_bias = bias != nullptr ? bias + expert * columns : nullptr;
  for (int64_t c = threadIdx.x; c < out_columns; c += kRowThreads) {
    const float x = to_float(input[c]) + (own_bias != nullptr ? own_bias[c] : 0.0f);
    float value = activation_and_slope(x, activation).x;
    if (swiglu) value *= to_float(input[c + out_columns]) + (own_bias != nullptr ? own_bias[c + out_columns] : 0.0f);
    out[row * out_columns + c] = from_float<Out>(value);
  }
}

constexpr int kSumColumns = 32;  // the backward's columns a block: a warp's lanes
constexpr int kSumParts = 32;    // rows summed in strided parts (a warp each), combined in order
constexpr int kUnroll = 4;       // rows a thread loads at once

/// A block per (column tile, expert): walks the expert's rows, writes each row's input gradient and sums the
/// bias's (both halves' under SwiGLU).
template <typename In, typename Out>
__global__ void __launch_bounds__(kSumColumns* kSumParts)
    bias_activation_backward_kernel(const Out* __restrict__ grad_out, const In* __restrict__ hidden,
                                    const float* __restrict__ bias, const int64_t* __restrict__ offsets,
                                    In* __restrict__ grad_hidden, float* __restrict__ grad_bias, int64_t columns,
                                    ExpertActivation activation) {
  __shared__ float partial[2][kSumParts][kSumColumns];
  const int expert = blockIdx.y;
  const bool swiglu = activation == ExpertActivation::kSwiglu;
  const int64_t out_columns = swiglu ? columns / 2 : columns;
  const int column_in_tile = threadIdx.x % kSumColumns;
  const int part = threadIdx.x / kSumColumns;
  const int64_t c = int64_t{blockIdx.x} * kSumColumns + column_in_tile;
  const float* own_bias = bias != nullptr ? bias + int64_t{expert} * columns : nullptr;
  float sum_first = 0.0f, sum_second = 0.0f;
  if (c < out_columns) {
    const float bias_first = own_bias != nullptr ? own_bias[c] : 0.0f;
    const float bias_second = own_bias != nullptr && swiglu ? own_bias[c + out_columns] : 0.0f;
    const int64_t end = offsets[expert + 1];
    // kUnroll rows at a time, their loads issued together (the loop is bound by their latency).
    for (int64_t first_row = offsets[expert] + part; first_row < end; first_row += kUnroll * kSumParts) {
      float g[kUnroll], x[kUnroll], up[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t row = first_row + u * kSumParts;
        const bool inside = row < end;
        g[u] = inside ? to_float(grad_out[row * out_columns + c]) : 0.0f;
        x[u] = inside ? to_float(hidden[row * columns + c]) + bias_first : 0.0f;
        up[u] = inside && swiglu ? to_float(hidden[row * columns + c + out_columns]) + bias_second : 0.0f;
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t row = first_row + u * kSumParts;
        if (row >= end) break;
        const float2 both = activation_and_slope(x[u], activation);
        if (swiglu) {
          const float grad_gate = g[u] * up[u] * both.y;
          const float grad_up = g[u] * both.x;
          grad_hidden[row * columns + c] = from_float<In>(grad_gate);
          grad_hidden[row * columns + c + out_columns] = from_float<In>(grad_up);
          sum_first += grad_gate;
          sum_second += grad_up;
        } else {
          const float grad_x = g[u] * both.y;
          grad_hidden[row * columns + c] = from_float<In>(grad_x);
          sum_first += grad_x;
        }
      }
    }
  }
  if (grad_bias == nullptr) return;
  partial[0][part][column_in_tile] = sum_first;
  partial[1][part][column_in_tile] = sum_second;
  __syncthreads();
  if (part != 0 || c >= out_columns) return;
  float first = 0.0f, second = 0.0f;
  for (int p = 0; p < kSumParts; ++p) {
    first += partial[0][p][column_in_tile];
    second += partial[1][p][column_in_tile];
  }
  grad_bias[int64_t{expert} * columns + c] = first;
  if (swiglu) grad_bias[int64_t{expert} * columns + c + out_columns] = second;
}

}  // namespace

void launch_permute(const void* tokens, Element token_type, const int64_t* order, void* sorted, Element sorted_type,
                    const PermuteShape& shape, void* stream) {
  const int64_t rows = shape.tokens * shape.top_k;
  if (rows == 0 || shape.columns == 0) return;
  with_types(token_type, sorted_type, [&](auto pair) {
    using In = typename decltype(pair)::First;
    using Out = typename decltype(pair)::Second;
    permute_kernel<In, Out><<<static_cast<unsigned>(rows), kRowThreads, 0, as_stream(stream)>>>(
        static_cast<const In*>(tokens), order, static_cast<Out*>(sorted), static_cast<int>(shape.top_k), shape.columns);
  });
  detail::check_launch("permute_kernel");
}

void launch_permute_backward(const void* grad_sorted, Element sorted_type, const int64_t* destination,
                             void* grad_tokens, Element token_type, const PermuteShape& shape, void* stream) {
  if (shape.tokens == 0 || shape.columns == 0) return;
  with_types(sorted_type, token_type, [&](auto pair) {
    using Grad = typename decltype(pair)::First;
    using Out = typename decltype(pair)::Second;
    permute_backward_kernel<Grad, Out><<<static_cast<unsigned>(shape.tokens), kRowThreads, 0, as_stream(stream)>>>(
        static_cast<const Grad*>(grad_sorted), destination, static_cast<Out*>(grad_tokens),
        static_cast<int>(shape.top_k), shape.columns);
  });
  detail::check_launch("permute_backward_kernel");
}

void launch_unpermute(const void* expert_output, Element type, const float* weights, const int64_t* destination,
                      void* out, const PermuteShape& shape, void* stream) {
  if (shape.tokens == 0 || shape.columns == 0) return;
  const auto grid = static_cast<unsigned>(shape.tokens);
  const int top_k = static_cast<int>(shape.top_k);
  if (type == Element::kFloat32) {
    unpermute_kernel<float><<<grid, kRowThreads, 0, as_stream(stream)>>>(
        static_cast<const float*>(expert_output), weights, destination, static_cast<float*>(out), top_k, shape.columns);
  } else {
    unpermute_kernel<__nv_bfloat16><<<grid, kRowThreads, 0, as_stream(stream)>>>(
        static_cast<const __nv_bfloat16*>(expert_output), weights, destination, static_cast<__nv_bfloat16*>(out), top_k,
        shape.columns);
  }
  detail::check_launch("unpermute_kernel");
}

void launch_unpermute_backward(const void* grad_out, const void* expert_output, Element type, const float* weights,
                               const int64_t* order, void* grad_expert_output, float* grad_weights,
                               const PermuteShape& shape, void* stream) {
  const int64_t rows = shape.tokens * shape.top_k;
  if (rows == 0) return;
  const auto grid = static_cast<unsigned>(rows);
  const int top_k = static_cast<int>(shape.top_k);
  if (type == Element::kFloat32) {
    unpermute_backward_kernel<float><<<grid, kRowThreads, 0, as_stream(stream)>>>(
        static_cast<const float*>(grad_out), static_cast<const float*>(expert_output), weights, order,
        static_cast<float*>(grad_expert_output), grad_weights, top_k, shape.columns);
  } else {
    unpermute_backward_kernel<__nv_bfloat16><<<grid, kRowThreads, 0, as_stream(stream)>>>(
        static_cast<const __nv_bfloat16*>(grad_out), static_cast<const __nv_bfloat16*>(expert_output), weights, order,
        static_cast<__nv_bfloat16*>(grad_expert_output), grad_weights, top_k, shape.columns);
  }
  detail::check_launch("unpermute_backward_kernel");
}

void launch_bias_activation(const void* hidden, Element hidden_type, const float* bias, const int64_t* offsets,
                            void* out, Element out_type, const BiasActivationShape& shape, void* stream) {
  if (shape.rows == 0 || shape.columns == 0) return;
  with_types(hidden_type, out_type, [&](auto pair) {
    using In = typename decltype(pair)::First;
    using Out = typename decltype(pair)::Second;
    bias_activation_kernel<In, Out><<<static_cast<unsigned>(shape.rows), kRowThreads, 0, as_stream(stream)>>>(
        static_cast<const In*>(hidden), bias, offsets, static_cast<Out*>(out), static_cast<int>(shape.experts),
        shape.columns, shape.activation);
  });
  detail::check_launch("bias_activation_kernel");
}

void launch_bias_activation_backward(const void* grad_out, Element out_type, const void* hidden, Element hidden_type,
                                     const float* bias, const int64_t* offsets, void* grad_hidden, float* grad_bias,
                                     const BiasActivationShape& shape, void* stream) {
  if (shape.columns == 0 || shape.experts == 0) return;
  const int64_t out_columns = shape.activation == ExpertActivation::kSwiglu ? shape.columns / 2 : shape.columns;
  const dim3 grid(blocks_of(out_columns, kSumColumns), static_cast<unsigned>(shape.experts));
  with_types(hidden_type, out_type, [&](auto pair) {
    using In = typename decltype(pair)::First;
    using Out = typename decltype(pair)::Second;
    bias_activation_backward_kernel<In, Out><<<grid, kSumColumns * kSumParts, 0, as_stream(stream)>>>(
        static_cast<const Out*>(grad_out), static_cast<const In*>(hidden), bias, offsets, static_cast<In*>(grad_hidden),
        grad_bias, shape.columns, shape.activation);
  });
  detail::check_launch("bias_activation_backward_kernel");
}
}  // namespace graphed::kernels
