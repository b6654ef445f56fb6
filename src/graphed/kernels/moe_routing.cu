// kernels/moe_routing.cu — see kernels/moe_routing.h. The router gives each token a warp whose lanes hold experts
// lane, lane + 32, ... in registers: the softmax's max and sum are warp butterflies (every lane ends with the same
// bits), and each of the k choices is a warp arg-max under a total order (larger value, then lower expert), so the
// choice never depends on the reduction's shape. The counting sort is one block: a histogram, a scan, then chunks of
// 1,024 assignments ranked inside each warp by matching keys and across warps by a per-expert scan in warp order.
#include "graphed/kernels/moe_routing.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <climits>
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
using detail::warp_max;
using detail::warp_sum;

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kSlots = static_cast<int>(kRouteMaxExperts / 32);  // experts a lane holds
constexpr int kRouteWarps = 4;                                   // tokens a block
constexpr int kNoExpert = INT_MAX;
constexpr int kSortThreads = 1024;

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

/// Adds each choice's value to its expert's slot of `grad`: lane j holds choice j's expert and value (every lane of
/// the warp calls it; the slots are striped over the lanes, slot s of lane l being expert s x 32 + l).
__device__ __forceinline__ void add_at_chosen_experts(float (&grad)[kSlots], int own_expert, float own_value, int top_k,
                                                      int lane) {
  for (int choice = 0; choice < top_k; ++choice) {
    const int expert = __shfl_sync(kFullMask, own_expert, choice);
    const float value = __shfl_sync(kFullMask, own_value, choice);
#pragma unroll
    for (int slot = 0; slot < kSlots; ++slot) {
      if (slot * 32 + lane == expert) grad[slot] += value;
    }
  }
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
    add_at_chosen_experts(grad, own_expert, own_grad, top_k, lane);
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
    add_at_chosen_experts(grad, own_expert, own_logit_grad, top_k, lane);
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

}  // namespace graphed::kernels
