// kernels/moe_routing.cu — see kernels/moe_routing.h. The router gives each token a warp whose lanes hold experts
// lane, lane + 32, ... in registers: the softmax's max and sum are warp butterflies (every lane ends with the same
// bits), and each of the k choices is a warp arg-max under a total order (larger value, then lower expert), so the
// choice never depends on the reduction's shape. The counting sort is one block: a histogram, a scan, then chunks of
// 1,024 assignments ranked inside each warp by matching keys and across warps by a per-expert scan in warp order.
// The gathers give a block to a row; each output element is written by one thread, so no float is added by atomics.
#include "graphed/kernels/moe_routing.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <type_traits>

#include "graphed/kernels/detail/block_reduce.cuh"
#include "graphed/kernels/detail/launch_check.h"

namespace graphed::kernels {
namespace {

using detail::block_reduce;
using detail::warp_max;
using detail::warp_sum;

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kSlots = static_cast<int>(kRouteMaxExperts / 32);  // experts a lane holds
constexpr int kRouteWarps = 4;                                   // tokens a block
constexpr int kNoExpert = INT_MAX;
constexpr int kRowThreads = 128;  // the gathers' block
constexpr int kSortThreads = 1024;

template <typename T>
__device__ __forceinline__ float to_float(T value) {
  if constexpr (std::is_same_v<T, float>) {
    return value;
  } else {
    return __bfloat162float(value);
  }
}

template <typename T>
__device__ __forceinline__ T from_float(float value) {
  if constexpr (std::is_same_v<T, float>) {
    return value;
  } else {
    return __float2bfloat16_rn(value);
  }
}

/// Whether candidate (value, expert) beats (best_value, best_expert): a real expert beats none, then the larger
/// value, then the lower expert. A strict total order over real experts with non-NaN values.
__device__ __forceinline__ bool beats(float value, int expert, float best_value, int best_expert) {
  if (expert == kNoExpert) return false;
  if (best_expert == kNoExpert) return true;
  return value > best_value || (value == best_value && expert < best_expert);
}

/// The warp's best candidate, the same on every lane (lane 0's after the butterfly).
__device__ __forceinline__ void warp_best(float& value, int& expert) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float other_value = __shfl_xor_sync(kFullMask, value, offset);
    const int other_expert = __shfl_xor_sync(kFullMask, expert, offset);
    if (beats(other_value, other_expert, value, expert)) {
      value = other_value;
      expert = other_expert;
    }
  }
  value = __shfl_sync(kFullMask, value, 0);
  expert = __shfl_sync(kFullMask, expert, 0);
}

template <typename T>
__global__ void __launch_bounds__(kRouteWarps * 32)
    route_forward_kernel(const T* __restrict__ logits, float* __restrict__ probabilities, float* __restrict__ weights,
                         int64_t* __restrict__ indices, int64_t tokens, int experts, int top_k, bool pre_softmax) {
  const int lane = threadIdx.x & 31;
  const int64_t token = int64_t{blockIdx.x} * kRouteWarps + (threadIdx.x >> 5);
  if (token >= tokens) return;  // the whole warp leaves together
  const T* row = logits + token * experts;
  float logit[kSlots];
  float probability[kSlots];
  float largest = -INFINITY;
#pragma unroll
  for (int slot = 0; slot < kSlots; ++slot) {
    const int expert = slot * 32 + lane;
    logit[slot] = expert < experts ? to_float(row[expert]) : -INFINITY;
    largest = fmaxf(largest, logit[slot]);
  }
  largest = warp_max(largest);
  float total = 0.0f;
#pragma unroll
  for (int slot = 0; slot < kSlots; ++slot) {
    probability[slot] = slot * 32 + lane < experts ? expf(logit[slot] - largest) : 0.0f;
    total += probability[slot];
  }
  total = warp_sum(total);
#pragma unroll
  for (int slot = 0; slot < kSlots; ++slot) {
    probability[slot] /= total;
    const int expert = slot * 32 + lane;
    if (expert < experts) probabilities[token * experts + expert] = probability[slot];
  }
  // k passes of a warp arg-max over the experts not yet chosen; lane j keeps choice j.
  unsigned chosen = 0;  // bit s: this lane's slot s is taken
  float own_value = 0.0f;
  int own_expert = 0;
  for (int choice = 0; choice < top_k; ++choice) {
    float best_value = -INFINITY;
    int best_expert = kNoExpert;
#pragma unroll
    for (int slot = 0; slot < kSlots; ++slot) {
      const int expert = slot * 32 + lane;
      const float value = pre_softmax ? probability[slot] : logit[slot];
      if (expert < experts && !((chosen >> slot) & 1u) && beats(value, expert, best_value, best_expert)) {
        best_value = value;
        best_expert = expert;
      }
    }
    warp_best(best_value, best_expert);
    if ((best_expert & 31) == lane) chosen |= 1u << (best_expert >> 5);
    if (choice == lane) {
      own_value = best_value;
      own_expert = best_expert;
    }
  }
  // The weights: the chosen probabilities, or a softmax over the chosen logits (the first is the largest).
  const float top = __shfl_sync(kFullMask, own_value, 0);
  const float exponent = lane < top_k ? expf(own_value - top) : 0.0f;
  const float chosen_total = warp_sum(exponent);
  if (lane < top_k) {
    weights[token * top_k + lane] = pre_softmax ? own_value : exponent / chosen_total;
    indices[token * top_k + lane] = own_expert;
  }
}

/// A block an expert: its probability mass over the tokens and its count among the assignments.
__global__ void route_sums_kernel(const float* __restrict__ probabilities, const int64_t* __restrict__ indices,
                                  float* __restrict__ mass, float* __restrict__ counts, int64_t tokens, int experts,
                                  int top_k) {
  __shared__ float scratch[32];
  const int expert = blockIdx.x;
  float sum = 0.0f;
  for (int64_t token = threadIdx.x; token < tokens; token += blockDim.x) sum += probabilities[token * experts + expert];
  sum = block_reduce<false>(sum, scratch);
  float count = 0.0f;  // exact below 2^24 assignments a thread
  for (int64_t a = threadIdx.x; a < tokens * top_k; a += blockDim.x) count += indices[a] == expert ? 1.0f : 0.0f;
  count = block_reduce<false>(count, scratch);
  if (threadIdx.x == 0) {
    mass[expert] = sum;
    counts[expert] = count;
  }
}

__global__ void switch_loss_kernel(const float* __restrict__ mass, const float* __restrict__ counts, float scale,
                                   float* __restrict__ loss, int experts) {
  __shared__ float scratch[32];
  float sum = 0.0f;
  for (int e = threadIdx.x; e < experts; e += blockDim.x) sum += mass[e] * counts[e];
  sum = block_reduce<false>(sum, scratch);
  if (threadIdx.x == 0) loss[0] = sum * scale;
}

__global__ void switch_loss_backward_kernel(const float* __restrict__ counts, const float* __restrict__ grad_loss,
                                            float scale, float* __restrict__ grad_mass, int experts) {
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e < experts) grad_mass[e] = scale * counts[e] * grad_loss[0];
}

template <typename T>
__global__ void __launch_bounds__(kRouteWarps * 32)
    route_backward_kernel(const float* __restrict__ probabilities, const float* __restrict__ weights,
                          const int64_t* __restrict__ indices, const float* __restrict__ grad_weights,
                          const float* __restrict__ grad_mass, T* __restrict__ grad_logits, int64_t tokens, int experts,
                          int top_k, bool pre_softmax) {
  const int lane = threadIdx.x & 31;
  const int64_t token = int64_t{blockIdx.x} * kRouteWarps + (threadIdx.x >> 5);
  if (token >= tokens) return;
  float probability[kSlots];
  float grad[kSlots];  // first the gradient of each probability, then of each logit
#pragma unroll
  for (int slot = 0; slot < kSlots; ++slot) {
    const int expert = slot * 32 + lane;
    probability[slot] = expert < experts ? probabilities[token * experts + expert] : 0.0f;
    grad[slot] = expert < experts && grad_mass != nullptr ? grad_mass[expert] : 0.0f;
  }
  // The chosen experts' weights and their gradients: lane j holds choice j.
  const bool holds = lane < top_k;
  const int own_expert = holds ? static_cast<int>(indices[token * top_k + lane]) : 0;
  const float own_weight = holds ? weights[token * top_k + lane] : 0.0f;
  const float own_grad = holds && grad_weights != nullptr ? grad_weights[token * top_k + lane] : 0.0f;
  if (pre_softmax) {  // the weights are probabilities: their gradients join the probabilities'
    for (int choice = 0; choice < top_k; ++choice) {
      const int expert = __shfl_sync(kFullMask, own_expert, choice);
      const float g = __shfl_sync(kFullMask, own_grad, choice);
#pragma unroll
      for (int slot = 0; slot < kSlots; ++slot) {
        if (slot * 32 + lane == expert) grad[slot] += g;
      }
    }
  }
  float dot = 0.0f;
#pragma unroll
  for (int slot = 0; slot < kSlots; ++slot) dot += probability[slot] * grad[slot];
  dot = warp_sum(dot);
#pragma unroll
  for (int slot = 0; slot < kSlots; ++slot) grad[slot] = probability[slot] * (grad[slot] - dot);
  if (!pre_softmax) {  // the softmax over the chosen logits
    const float weighted = warp_sum(own_weight * own_grad);
    const float own_logit_grad = own_weight * (own_grad - weighted);
    for (int choice = 0; choice < top_k; ++choice) {
      const int expert = __shfl_sync(kFullMask, own_expert, choice);
      const float g = __shfl_sync(kFullMask, own_logit_grad, choice);
#pragma unroll
      for (int slot = 0; slot < kSlots; ++slot) {
        if (slot * 32 + lane == expert) grad[slot] += g;
      }
    }
  }
#pragma unroll
  for (int slot = 0; slot < kSlots; ++slot) {
    const int expert = slot * 32 + lane;
    if (expert < experts) grad_logits[token * experts + expert] = from_float<T>(grad[slot]);
  }
}

/// One block: a histogram and its scan give each expert's offset; then each chunk of 1,024 assignments is ranked,
/// inside a warp by the lanes of equal key before it, across warps by each expert's running count in warp order.
__global__ void __launch_bounds__(kSortThreads)
    sort_plan_kernel(const int64_t* __restrict__ experts_of, int64_t assignments, int experts,
                     int64_t* __restrict__ order, int64_t* __restrict__ destination, int64_t* __restrict__ counts,
                     int64_t* __restrict__ offsets) {
  extern __shared__ int shared[];
  int* running = shared;              // [E]: the count, then each expert's next row
  int* warp_rows = shared + experts;  // [32][E]: a chunk's rows of each warp and expert, then their first row
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  for (int e = threadIdx.x; e < experts; e += kSortThreads) running[e] = 0;
  __syncthreads();
  for (int64_t a = threadIdx.x; a < assignments; a += kSortThreads) atomicAdd(&running[experts_of[a]], 1);
  __syncthreads();
  if (threadIdx.x == 0) {
    int start = 0;
    for (int e = 0; e < experts; ++e) {
      const int count = running[e];
      counts[e] = count;
      offsets[e] = start;
      running[e] = start;
      start += count;
    }
    offsets[experts] = start;
  }
  for (int64_t base = 0; base < assignments; base += kSortThreads) {
    for (int i = threadIdx.x; i < 32 * experts; i += kSortThreads) warp_rows[i] = 0;
    __syncthreads();  // also publishes the offsets and the previous chunk's running counts
    const int64_t a = base + threadIdx.x;
    const bool valid = a < assignments;
    const int key = valid ? static_cast<int>(experts_of[a]) : -1;
    const unsigned peers = __match_any_sync(kFullMask, key);
    const int rank = __popc(peers & ((1u << lane) - 1u));
    if (valid && rank == 0) warp_rows[warp * experts + key] = __popc(peers);
    __syncthreads();
    for (int e = threadIdx.x; e < experts; e += kSortThreads) {
      int next = running[e];
      for (int w = 0; w < 32; ++w) {
        const int rows = warp_rows[w * experts + e];
        warp_rows[w * experts + e] = next;
        next += rows;
      }
      running[e] = next;
    }
    __syncthreads();
    if (valid) {
      const int64_t row = warp_rows[warp * experts + key] + rank;
      order[row] = a;
      destination[a] = row;
    }
    __syncthreads();  // warp_rows is zeroed for the next chunk
  }
}

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

unsigned blocks_of(int64_t count, int64_t per_block) {
  return static_cast<unsigned>((count + per_block - 1) / per_block);
}

cudaStream_t as_stream(void* stream) { return static_cast<cudaStream_t>(stream); }

}  // namespace

void launch_route_forward(const void* logits, float* probabilities, float* weights, int64_t* indices,
                          const RouteShape& shape, void* stream) {
  if (shape.tokens == 0) return;
  const unsigned grid = blocks_of(shape.tokens, kRouteWarps);
  const int experts = static_cast<int>(shape.experts);
  const int top_k = static_cast<int>(shape.top_k);
  if (shape.logits == Element::kFloat32) {
    route_forward_kernel<float>
        <<<grid, kRouteWarps * 32, 0, as_stream(stream)>>>(static_cast<const float*>(logits), probabilities, weights,
                                                           indices, shape.tokens, experts, top_k, shape.pre_softmax);
  } else {
    route_forward_kernel<__nv_bfloat16><<<grid, kRouteWarps * 32, 0, as_stream(stream)>>>(
        static_cast<const __nv_bfloat16*>(logits), probabilities, weights, indices, shape.tokens, experts, top_k,
        shape.pre_softmax);
  }
  detail::check_launch("route_forward_kernel");
}

void launch_route_sums(const float* probabilities, const int64_t* indices, float* mass, float* counts,
                       const RouteShape& shape, void* stream) {
  if (shape.experts == 0) return;
  route_sums_kernel<<<static_cast<unsigned>(shape.experts), kSortThreads, 0, as_stream(stream)>>>(
      probabilities, indices, mass, counts, shape.tokens, static_cast<int>(shape.experts),
      static_cast<int>(shape.top_k));
  detail::check_launch("route_sums_kernel");
}

void launch_route_backward(const float* probabilities, const float* weights, const int64_t* indices,
                           const float* grad_weights, const float* grad_mass, void* grad_logits,
                           const RouteShape& shape, void* stream) {
  if (shape.tokens == 0) return;
  const unsigned grid = blocks_of(shape.tokens, kRouteWarps);
  const int experts = static_cast<int>(shape.experts);
  const int top_k = static_cast<int>(shape.top_k);
  if (shape.logits == Element::kFloat32) {
    route_backward_kernel<float><<<grid, kRouteWarps * 32, 0, as_stream(stream)>>>(
        probabilities, weights, indices, grad_weights, grad_mass, static_cast<float*>(grad_logits), shape.tokens,
        experts, top_k, shape.pre_softmax);
  } else {
    route_backward_kernel<__nv_bfloat16><<<grid, kRouteWarps * 32, 0, as_stream(stream)>>>(
        probabilities, weights, indices, grad_weights, grad_mass, static_cast<__nv_bfloat16*>(grad_logits),
        shape.tokens, experts, top_k, shape.pre_softmax);
  }
  detail::check_launch("route_backward_kernel");
}

void launch_switch_loss(const float* mass, const float* counts, float scale, float* loss, int64_t experts,
                        void* stream) {
  switch_loss_kernel<<<1, 256, 0, as_stream(stream)>>>(mass, counts, scale, loss, static_cast<int>(experts));
  detail::check_launch("switch_loss_kernel");
}

void launch_switch_loss_backward(const float* counts, const float* grad_loss, float scale, float* grad_mass,
                                 int64_t experts, void* stream) {
  if (experts == 0) return;
  switch_loss_backward_kernel<<<blocks_of(experts, 256), 256, 0, as_stream(stream)>>>(
      counts, grad_loss, scale, grad_mass, static_cast<int>(experts));
  detail::check_launch("switch_loss_backward_kernel");
}

void launch_sort_plan(const int64_t* experts_of, int64_t assignments, int64_t experts, int64_t* order,
                      int64_t* destination, int64_t* counts, int64_t* offsets, void* stream) {
  const std::size_t shared = sizeof(int) * static_cast<std::size_t>(33 * experts);
  sort_plan_kernel<<<1, kSortThreads, shared, as_stream(stream)>>>(experts_of, assignments, static_cast<int>(experts),
                                                                   order, destination, counts, offsets);
  detail::check_launch("sort_plan_kernel");
}

namespace {

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
