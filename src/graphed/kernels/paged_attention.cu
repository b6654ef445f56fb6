// kernels/paged_attention.cu — see kernels/paged_attention.h. Pass one: a thread block per (token,
// group, split) loads the group's queries (heads / groups of them) and finds the split's cache rows once (a block takes
// several splits, z, z + Z, ..., where a launch would hold more than 32,768 blocks, each split written alike);
// warps score the keys (a lane per key, 16-byte loads, eight in flight), take the softmax step with warp
// reductions and sum the values (lanes split the head into eight-value slices and positions), a head to a
// warp or, for groups of up to four heads, a head to several warps whose chunks are folded in order; it
// writes each head's running maximum, exponent sum and unnormalised output. Pass two: a thread block per
// (token, head) folds the splits that hold its positions together, in split order. fp32 arithmetic
// throughout. Both are programmatic dependent launches. A token whose positions all lie in the first split
// gets its output from pass one (divided by its sum as pass two would), and a launch whose context fits one
// split has no pass two. Given a split count (a device int64), both passes skip the tokens at or past it, which
// the tile kernel of kernels/paged_prefill_attention.h writes. (A block per head instead of per group was tried,
// 2026-11-28 on an H200: a batch-1 decode step 0.87 against 0.98 ms, but batch 32 and 128 1.74 and 3.85 against 1.32
// and 2.29 ms: the group's rows read four times over. docs/benchmarks.md, "One engine (issue 43)".)
#include "graphed/kernels/paged_attention.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "graphed/kernels/detail/bf16_vectors.cuh"
#include "graphed/kernels/detail/block_reduce.cuh"
#include "graphed/kernels/detail/programmatic_launch.cuh"

namespace graphed::kernels {
namespace {

constexpr int kMaxWarps = 8;  // warps of a split block at most
constexpr int kMaxHeadsPerGroup = 16;
constexpr int kMaxHeadDim = 256;
constexpr int kSplit = static_cast<int>(kPagedAttentionSplit);
constexpr int64_t kTargetBlocks =
    32768;  // split blocks a launch holds at most (batch 256, 8 groups, 16 splits: 32,768)

/// Warps that share one head's split: as many as fit kMaxWarps with every head of the group at once.
__host__ __device__ __forceinline__ int warps_per_head(int ratio) {
  return ratio * 2 <= kMaxWarps ? kMaxWarps / ratio : 1;
}

using detail::load_eight;
__device__ __forceinline__ float to_float(__nv_bfloat16 value) { return __bfloat162float(value); }
__device__ __forceinline__ float to_float(float value) { return value; }
__device__ __forceinline__ void store(__nv_bfloat16* target, float value) { *target = __float2bfloat16(value); }
__device__ __forceinline__ void store(float* target, float value) { *target = value; }

struct Layout {
  int heads, groups, head_dim, block_size, table_width, splits;
};

/// Workspace of (token, head, split): [head_dim] output, then max, then sum.
__device__ __forceinline__ float* partial_of(float* workspace, const Layout& layout, int64_t token, int head,
                                             int split) {
  return workspace + ((token * layout.heads + head) * layout.splits + split) * (layout.head_dim + 2);
}

/// Where the split's positions of one KV group sit in the cache: offsets[j] (in elements) of position
/// first + j, filled by the whole block from the request's block table before any key is read.
__device__ void find_rows(const int64_t* block_tables, const int64_t* token_request, const Layout& layout,
                          int64_t token, int group, int64_t first, int length, int64_t* offsets) {
  const int64_t groups = layout.groups;
  const int64_t* table = block_tables + token_request[token] * layout.table_width;
  for (int j = threadIdx.x; j < length; j += blockDim.x) {
    const int64_t position = first + j;
    const int64_t block = table[position / layout.block_size];
    offsets[j] = ((block * layout.block_size + position % layout.block_size) * groups + group) * layout.head_dim;
  }
}

/// One warp's head over the split: weights[j] = exp(scale q . k_j - max) for lane j, j + 32, ...;
/// returns (max, sum of the weights), in every lane.
template <typename Scalar>
__device__ float2 exponentiate_scores(const Scalar* key_cache, const int64_t* offsets, int head_dim, const float* q,
                                      int length, float scale, float* weights) {
  const int lane = threadIdx.x & 31;
  float largest = -INFINITY;
  for (int j = lane; j < length; j += 32) {
    weights[j] = detail::dot_eight_at_a_time(key_cache + offsets[j], q, head_dim / 8) * scale;
    largest = fmaxf(largest, weights[j]);
  }
  largest = detail::warp_max(largest);
  float total = 0.0f;
  for (int j = lane; j < length; j += 32) {
    weights[j] = __expf(weights[j] - largest);
    total += weights[j];
  }
  __syncwarp();  // every lane reads every weight next
  return make_float2(largest, detail::warp_sum(total));
}

/// One warp's weighted sum of the split's values: lane = part x slices + slice sums slice `slice` (eight
/// values) of positions part, part + parts, ... in order, eight loads in flight; the parts are then added
/// in part order. Lanes [0, slices) return the head's sums; the others return zeros.
template <typename Scalar>
__device__ void sum_values(const Scalar* value_cache, const int64_t* offsets, int head_dim, int length,
                           const float* weights, float (&result)[8]) {
  constexpr int kInFlight = 8;
  const int lane = threadIdx.x & 31;
  const int slices = head_dim / 8;
  const int parts = 32 / slices;
  const int slice = lane % slices;
  const int part = lane / slices;
  float sum[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  if (part < parts) {
    for (int j = part; j < length; j += kInFlight * parts) {
      float values[kInFlight][8];
#pragma unroll
      for (int c = 0; c < kInFlight; ++c) {
        if (j + c * parts < length) load_eight(value_cache + offsets[j + c * parts] + slice * 8, values[c]);
      }
#pragma unroll
      for (int c = 0; c < kInFlight; ++c) {
        if (j + c * parts >= length) break;
        const float weight = weights[j + c * parts];
#pragma unroll
        for (int e = 0; e < 8; ++e) sum[e] += weight * values[c][e];
      }
    }
  }
#pragma unroll
  for (int e = 0; e < 8; ++e) result[e] = 0.0f;
  for (int p = 0; p < parts; ++p) {
#pragma unroll
    for (int e = 0; e < 8; ++e) result[e] += __shfl_sync(0xffffffffu, sum[e], p * slices + slice);
  }
  if (lane >= slices) {
#pragma unroll
    for (int e = 0; e < 8; ++e) result[e] = 0.0f;
  }
}

/// Where a split block writes: each head's partial (max, sum, unnormalised output) into the workspace, or,
/// for a token whose positions all lie in split 0, its normalised output straight into the result (what the
/// combine would compute from the one partial: output / sum, so the combine skips the token).
template <typename Scalar>
struct SplitTarget {
  float* partial_of_head0;  ///< the workspace's (token, first head of the group, split)
  int64_t partial_stride;   ///< between heads
  Scalar* output_of_head0;  ///< non-null: the result's (token, first head of the group)
};

/// Writes one head's eight output values of slice `slice` (and, from lane 0, its max and sum) to `target`.
template <typename Scalar>
__device__ __forceinline__ void write_head(const SplitTarget<Scalar>& target, int head, int head_dim, int slice,
                                           const float (&values)[8], float2 softmax, bool writes_values,
                                           bool writes_softmax) {
  if (target.output_of_head0 != nullptr) {
    Scalar* out = target.output_of_head0 + head * head_dim;
    if (writes_values) {
#pragma unroll
      for (int e = 0; e < 8; ++e) store(out + slice * 8 + e, values[e] / softmax.y);
    }
    return;
  }
  float* out = target.partial_of_head0 + head * target.partial_stride;
  if (writes_values) {
#pragma unroll
    for (int e = 0; e < 8; ++e) out[slice * 8 + e] = values[e];
  }
  if (writes_softmax) {
    out[head_dim] = softmax.x;
    out[head_dim + 1] = softmax.y;
  }
}

/// Several warps per head (heads x warps per head <= kMaxWarps): warp part of head h takes a contiguous
/// chunk of the split's positions; the parts' (max, sum, output) are folded in part order.
template <typename Scalar>
__device__ void split_heads_across_warps(const Scalar* key_cache, const Scalar* value_cache, const int64_t* offsets,
                                         const float* q, int length, float scale, int ratio, int per_head, float* pool,
                                         const SplitTarget<Scalar>& target, int head_dim) {
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const int head = warp / per_head;
  const int part = warp % per_head;
  const int chunk = (length + per_head - 1) / per_head;
  const int start = part * chunk;
  const int size = head < ratio ? max(0, min(chunk, length - start)) : 0;
  float2 softmax = make_float2(-INFINITY, 0.0f);
  float sums[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  if (head < ratio) {
    float* weights = pool + head * kSplit + start;  // [ratio][kSplit]: each part writes its own chunk
    softmax = exponentiate_scores(key_cache, offsets + start, head_dim, q + head * head_dim, size, scale, weights);
    sum_values(value_cache, offsets + start, head_dim, size, weights, sums);
  }
  __syncthreads();  // the weights are done with: the pool now holds each warp's part
  const int stride = head_dim + 2;
  float* mine = pool + warp * stride;
  if (lane < head_dim / 8) {
#pragma unroll
    for (int e = 0; e < 8; ++e) mine[lane * 8 + e] = sums[e];
  }
  if (lane == 0) {
    mine[head_dim] = softmax.x;
    mine[head_dim + 1] = softmax.y;
  }
  __syncthreads();
  for (int index = threadIdx.x; index < ratio * (head_dim / 8); index += blockDim.x) {
    const int h = index / (head_dim / 8);
    const int slice = index % (head_dim / 8);
    const float* parts = pool + h * per_head * stride;
    float largest = -INFINITY;
    for (int p = 0; p < per_head; ++p) largest = fmaxf(largest, parts[p * stride + head_dim]);
    float folded[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    float total = 0.0f;
    for (int p = 0; p < per_head; ++p) {
      const float m = parts[p * stride + head_dim];
      if (m == -INFINITY) continue;
      const float weight = __expf(m - largest);
#pragma unroll
      for (int e = 0; e < 8; ++e) folded[e] += parts[p * stride + slice * 8 + e] * weight;
      total += parts[p * stride + head_dim + 1] * weight;
    }
    write_head(target, h, head_dim, slice, folded, make_float2(largest, total), true, slice == 0);
  }
}

/// One split of a block's token and group: warps per head (split_heads_across_warps) when the group has at most
/// kMaxWarps / 2 heads, else a warp per head (heads warp, warp + warps, ...) with no block barrier.
template <typename Scalar>
__device__ void attend_split(const Scalar* key_cache, const Scalar* value_cache, const int64_t* offsets, const float* q,
                             int length, float scale, int ratio, int head_dim, float* pool,
                             const SplitTarget<Scalar>& target) {
  const int per_head = warps_per_head(ratio);
  if (per_head > 1) {
    split_heads_across_warps(key_cache, value_cache, offsets, q, length, scale, ratio, per_head, pool, target,
                             head_dim);
    return;
  }
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  for (int h = warp; h < ratio; h += blockDim.x >> 5) {
    float* weights = pool + warp * kSplit;
    const float2 softmax = exponentiate_scores(key_cache, offsets, head_dim, q + h * head_dim, length, scale, weights);
    float sums[8];
    sum_values(value_cache, offsets, head_dim, length, weights, sums);
    write_head(target, h, head_dim, lane, sums, softmax, lane < head_dim / 8, lane == 0);
    __syncwarp();  // the warp's weights are rewritten by its next head
  }
}

/// A block per (token, group, split lane): the group's queries in shared memory, then for each of the block's splits
/// its cache rows and attend_split.
template <typename Scalar>
__global__ void __launch_bounds__(kMaxWarps * 32)
    paged_attention_split_kernel(const Scalar* query, const Scalar* key_cache, const Scalar* value_cache,
                                 const int64_t* block_tables, const int64_t* token_request, const int64_t* positions,
                                 const int64_t* split_count, float* workspace, Scalar* output, Layout layout,
                                 float scale) {
  __shared__ float q[kMaxHeadsPerGroup * kMaxHeadDim];   // 16 KiB
  __shared__ float pool[kMaxWarps * (kMaxHeadDim + 2)];  // 8 KiB: weights, then the warps' parts
  __shared__ int64_t offsets[kSplit];                    // 2 KiB
  static_assert(kMaxWarps * kSplit <= kMaxWarps * (kMaxHeadDim + 2), "the pool holds a split of weights per warp");
  detail::wait_for_previous_kernel();
  detail::let_next_kernel_start();
  const int64_t token = blockIdx.x;
  if (split_count != nullptr && token >= *split_count) return;  // a prompt token: the tile kernel's
  const int group = blockIdx.y;
  const int ratio = layout.heads / layout.groups;
  const int head_dim = layout.head_dim;
  const int64_t count = positions[token] + 1;
  const Scalar* q_rows = query + (token * layout.heads + group * ratio) * head_dim;
  for (int i = threadIdx.x; i < ratio * head_dim; i += blockDim.x) q[i] = to_float(q_rows[i]);
  // The block takes splits z, z + Z, ... (Z = gridDim.z), each written as its own partial, so the result does
  // not depend on Z; past the token's context it stops (the combine reads only the splits before).
  for (int split = blockIdx.z; split < layout.splits; split += gridDim.z) {
    const int64_t first = static_cast<int64_t>(split) * kSplit;
    if (count <= first) break;
    const int length = static_cast<int>(count - first < kSplit ? count - first : kSplit);
    __syncthreads();  // the queries are in; the last split's rows and weights are no longer read
    find_rows(block_tables, token_request, layout, token, group, first, length, offsets);
    __syncthreads();
    SplitTarget<Scalar> target;
    target.partial_of_head0 = partial_of(workspace, layout, token, group * ratio, split);
    target.partial_stride = static_cast<int64_t>(layout.splits) * (head_dim + 2);
    target.output_of_head0 = count <= kSplit ? output + (token * layout.heads + group * ratio) * head_dim : nullptr;
    attend_split(key_cache, value_cache, offsets, q, length, scale, ratio, head_dim, pool, target);
  }
}

/// Folds the splits that hold positions of the token (ceil((position + 1) / kSplit) of them); a token of
/// one split was written by the split kernel.
template <typename Scalar>
__global__ void paged_attention_combine_kernel(const int64_t* positions, const int64_t* split_count,
                                               const float* workspace, Scalar* output, Layout layout) {
  detail::wait_for_previous_kernel();
  detail::let_next_kernel_start();
  const int64_t token = blockIdx.x;
  if (split_count != nullptr && token >= *split_count) return;
  const int head = blockIdx.y;
  const int head_dim = layout.head_dim;
  const int splits = min(static_cast<int>(positions[token] / kSplit) + 1, layout.splits);
  if (splits == 1) return;
  const float* first = partial_of(const_cast<float*>(workspace), layout, token, head, 0);
  const int stride = head_dim + 2;
  float largest = -INFINITY;
  for (int s = 0; s < splits; ++s) largest = fmaxf(largest, first[s * stride + head_dim]);
  float total = 0.0f;
  for (int s = 0; s < splits; ++s) {
    const float m = first[s * stride + head_dim];
    if (m != -INFINITY) total += first[s * stride + head_dim + 1] * __expf(m - largest);
  }
  Scalar* out = output + (token * layout.heads + head) * head_dim;
  for (int i = threadIdx.x; i < head_dim; i += blockDim.x) {
    float value = 0.0f;
    for (int s = 0; s < splits; ++s) {
      const float m = first[s * stride + head_dim];
      if (m != -INFINITY) value += first[s * stride + i] * __expf(m - largest);
    }
    store(out + i, value / total);
  }
}

template <typename Scalar>
void launch(const void* query, const void* key_cache, const void* value_cache, const int64_t* block_tables,
            const int64_t* token_request, const int64_t* positions, const int64_t* split_count, void* output,
            float* workspace, const PagedAttentionShape& shape, float scale, cudaStream_t stream) {
  Layout layout{static_cast<int>(shape.heads),       static_cast<int>(shape.groups),
                static_cast<int>(shape.head_dim),    static_cast<int>(shape.block_size),
                static_cast<int>(shape.table_width), static_cast<int>((shape.max_context + kSplit - 1) / kSplit)};
  // Blocks enough to fill the GPU; past that a block takes several splits, so that a long context limit (a model's
  // 131,072 positions: 512 splits) does not launch a block per split and token that would return at once.
  const int64_t lanes = std::max<int64_t>(
      1, (kTargetBlocks + shape.tokens * shape.groups - 1) / std::max<int64_t>(1, shape.tokens * shape.groups));
  const dim3 split_grid(static_cast<unsigned>(shape.tokens), static_cast<unsigned>(shape.groups),
                        static_cast<unsigned>(std::min<int64_t>(layout.splits, lanes)));
  const int ratio = static_cast<int>(shape.heads / shape.groups);
  const int warps = warps_per_head(ratio) > 1 ? ratio * warps_per_head(ratio) : std::min(ratio, kMaxWarps);
  detail::launch_programmatic(
      "paged_attention_split_kernel", paged_attention_split_kernel<Scalar>, split_grid, dim3(32 * warps), 0, stream,
      static_cast<const Scalar*>(query), static_cast<const Scalar*>(key_cache), static_cast<const Scalar*>(value_cache),
      block_tables, token_request, positions, split_count, workspace, static_cast<Scalar*>(output), layout, scale);
  if (layout.splits == 1) return;  // every token was written by the split kernel
  const dim3 combine_grid(static_cast<unsigned>(shape.tokens), static_cast<unsigned>(shape.heads));
  detail::launch_programmatic("paged_attention_combine_kernel", paged_attention_combine_kernel<Scalar>, combine_grid,
                              dim3(64), 0, stream, positions, split_count, static_cast<const float*>(workspace),
                              static_cast<Scalar*>(output), layout);
}

}  // namespace

int64_t paged_attention_workspace(const PagedAttentionShape& shape) {
  const int64_t splits = (shape.max_context + kPagedAttentionSplit - 1) / kPagedAttentionSplit;
  return shape.tokens * shape.heads * splits * (shape.head_dim + 2);
}

void launch_paged_attention(const void* query, const void* key_cache, const void* value_cache,
                            const int64_t* block_tables, const int64_t* token_request, const int64_t* positions,
                            const int64_t* split_count, void* output, float* workspace,
                            const PagedAttentionShape& shape, float scale, bool is_float, void* stream) {
  if (shape.tokens == 0) return;  // every token of the step is the tile kernel's
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
  if (is_float) {
    launch<float>(query, key_cache, value_cache, block_tables, token_request, positions, split_count, output, workspace,
                  shape, scale, cuda_stream);
  } else {
    launch<__nv_bfloat16>(query, key_cache, value_cache, block_tables, token_request, positions, split_count, output,
                          workspace, shape, scale, cuda_stream);
  }
}

}  // namespace graphed::kernels
