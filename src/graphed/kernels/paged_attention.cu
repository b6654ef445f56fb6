// kernels/paged_attention.cu — see kernels/paged_attention.h. Pass one: a thread block per (token,
// head, split) loads the head's query and finds the split's cache rows (of the head's KV group) once; its
// eight warps each take a contiguous chunk of the positions, score the keys (a lane per key, 16-byte loads,
// eight in flight), take the softmax step with warp reductions and sum the values (lanes split the head into
// eight-value slices and positions), and the warps' parts are folded in order; it writes the head's running
// maximum, exponent sum and unnormalised output. (A block per head, not per group: a short context at a small
// batch keeps four times as many blocks busy, and the group's rows come mostly from L2.) Pass two: a thread block per
// (token, head) folds the splits that hold its positions together, in split order. fp32 arithmetic
// throughout. Both are programmatic dependent launches. A token whose positions all lie in the first split
// gets its output from pass one (divided by its sum as pass two would), and a launch whose context fits one
// split has no pass two.
#include "graphed/kernels/paged_attention.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "graphed/kernels/detail/bf16_vectors.cuh"
#include "graphed/kernels/detail/block_reduce.cuh"
#include "graphed/kernels/detail/programmatic_launch.cuh"

namespace graphed::kernels {
namespace {

constexpr int kWarps = 8;  // warps of a split block, side by side over its positions
constexpr int kMaxHeadDim = 256;
constexpr int kSplit = static_cast<int>(kPagedAttentionSplit);

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

/// Where a split block writes: the head's partial (max, sum, unnormalised output) into the workspace, or,
/// for a token whose positions all lie in split 0, its normalised output straight into the result (what the
/// combine would compute from the one partial: output / sum, so the combine skips the token).
template <typename Scalar>
struct SplitTarget {
  float* partial = nullptr;  ///< the workspace's (token, head, split)
  Scalar* output = nullptr;  ///< non-null: the result's (token, head)
};

/// Writes the head's eight output values of slice `slice` (and, with `with_softmax`, its max and sum).
template <typename Scalar>
__device__ __forceinline__ void write_head(const SplitTarget<Scalar>& target, int head_dim, int slice,
                                           const float (&values)[8], float2 softmax, bool with_softmax) {
  if (target.output != nullptr) {
#pragma unroll
    for (int e = 0; e < 8; ++e) store(target.output + slice * 8 + e, values[e] / softmax.y);
    return;
  }
#pragma unroll
  for (int e = 0; e < 8; ++e) target.partial[slice * 8 + e] = values[e];
  if (with_softmax) {
    target.partial[head_dim] = softmax.x;
    target.partial[head_dim + 1] = softmax.y;
  }
}

/// The block's warps over one head's split: warp w takes the w-th contiguous chunk of the split's positions
/// (scores, softmax step and weighted values), then the warps' (max, sum, output) are folded in warp order
/// and written to `target`.
template <typename Scalar>
__device__ void fold_warps_over_split(const Scalar* key_cache, const Scalar* value_cache, const int64_t* offsets,
                                      const float* q, int length, float scale, float* pool,
                                      const SplitTarget<Scalar>& target, int head_dim) {
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const int chunk = (length + kWarps - 1) / kWarps;
  const int start = warp * chunk;
  const int size = max(0, min(chunk, length - start));
  float* weights = pool + start;  // [kSplit]: each warp writes its own chunk
  const float2 softmax = exponentiate_scores(key_cache, offsets + start, head_dim, q, size, scale, weights);
  float sums[8];
  sum_values(value_cache, offsets + start, head_dim, size, weights, sums);
  __syncthreads();  // the weights are done with: the pool now holds each warp's part
  const int stride = head_dim + 2;
  float* mine = pool + warp * stride;
  if (lane < head_dim / 8) {
#pragma unroll
    for (int e = 0; e < 8; ++e) mine[lane * 8 + e] = sums[e];
  }
  if (lane == 0) {
    mine[head_dim] = softmax.x;  // -inf for a warp past the split's positions
    mine[head_dim + 1] = softmax.y;
  }
  __syncthreads();
  for (int slice = threadIdx.x; slice < head_dim / 8; slice += blockDim.x) {
    float largest = -INFINITY;
    for (int w = 0; w < kWarps; ++w) largest = fmaxf(largest, pool[w * stride + head_dim]);
    float folded[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    float total = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
      const float m = pool[w * stride + head_dim];
      if (m == -INFINITY) continue;
      const float weight = __expf(m - largest);
#pragma unroll
      for (int e = 0; e < 8; ++e) folded[e] += pool[w * stride + slice * 8 + e] * weight;
      total += pool[w * stride + head_dim + 1] * weight;
    }
    write_head(target, head_dim, slice, folded, make_float2(largest, total), slice == 0);
  }
}

/// A block per (token, head, split): the head's query and the split's cache rows (of the head's KV group)
/// in shared memory, then fold_warps_over_split.
template <typename Scalar>
__global__ void __launch_bounds__(kWarps * 32)
    paged_attention_split_kernel(const Scalar* query, const Scalar* key_cache, const Scalar* value_cache,
                                 const int64_t* block_tables, const int64_t* token_request, const int64_t* positions,
                                 float* workspace, Scalar* output, Layout layout, float scale) {
  __shared__ float q[kMaxHeadDim];
  __shared__ float pool[kWarps * (kMaxHeadDim + 2)];  // 8 KiB: the weights, then the warps' parts
  __shared__ int64_t offsets[kSplit];                 // 2 KiB
  static_assert(kSplit <= kWarps * (kMaxHeadDim + 2), "the pool holds a split of weights");
  detail::wait_for_previous_kernel();
  detail::let_next_kernel_start();
  const int64_t token = blockIdx.x;
  const int head = blockIdx.y;
  const int split = blockIdx.z;
  const int group = head / (layout.heads / layout.groups);
  const int head_dim = layout.head_dim;
  const int64_t count = positions[token] + 1;
  const int64_t first = static_cast<int64_t>(split) * kSplit;
  if (count <= first) return;  // past the token's context: the combine reads only the splits before
  const int length = static_cast<int>(count - first < kSplit ? count - first : kSplit);
  const Scalar* q_row = query + (token * layout.heads + head) * head_dim;
  for (int i = threadIdx.x; i < head_dim; i += blockDim.x) q[i] = to_float(q_row[i]);
  find_rows(block_tables, token_request, layout, token, group, first, length, offsets);
  __syncthreads();
  SplitTarget<Scalar> target;
  target.partial = partial_of(workspace, layout, token, head, split);
  target.output = count <= kSplit ? output + (token * layout.heads + head) * head_dim : nullptr;
  fold_warps_over_split(key_cache, value_cache, offsets, q, length, scale, pool, target, head_dim);
}

/// Folds the splits that hold positions of the token (ceil((position + 1) / kSplit) of them); a token of
/// one split was written by the split kernel.
template <typename Scalar>
__global__ void paged_attention_combine_kernel(const int64_t* positions, const float* workspace, Scalar* output,
                                               Layout layout) {
  detail::wait_for_previous_kernel();
  detail::let_next_kernel_start();
  const int64_t token = blockIdx.x;
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
            const int64_t* token_request, const int64_t* positions, void* output, float* workspace,
            const PagedAttentionShape& shape, float scale, cudaStream_t stream) {
  Layout layout{static_cast<int>(shape.heads),       static_cast<int>(shape.groups),
                static_cast<int>(shape.head_dim),    static_cast<int>(shape.block_size),
                static_cast<int>(shape.table_width), static_cast<int>((shape.max_context + kSplit - 1) / kSplit)};
  const dim3 split_grid(static_cast<unsigned>(shape.tokens), static_cast<unsigned>(shape.heads),
                        static_cast<unsigned>(layout.splits));
  detail::launch_programmatic(
      "paged_attention_split_kernel", paged_attention_split_kernel<Scalar>, split_grid, dim3(32 * kWarps), 0, stream,
      static_cast<const Scalar*>(query), static_cast<const Scalar*>(key_cache), static_cast<const Scalar*>(value_cache),
      block_tables, token_request, positions, workspace, static_cast<Scalar*>(output), layout, scale);
  if (layout.splits == 1) return;  // every token was written by the split kernel
  const dim3 combine_grid(static_cast<unsigned>(shape.tokens), static_cast<unsigned>(shape.heads));
  detail::launch_programmatic("paged_attention_combine_kernel", paged_attention_combine_kernel<Scalar>, combine_grid,
                              dim3(64), 0, stream, positions, static_cast<const float*>(workspace),
                              static_cast<Scalar*>(output), layout);
}

}  // namespace

int64_t paged_attention_workspace(const PagedAttentionShape& shape) {
  const int64_t splits = (shape.max_context + kPagedAttentionSplit - 1) / kPagedAttentionSplit;
  return shape.tokens * shape.heads * splits * (shape.head_dim + 2);
}

void launch_paged_attention(const void* query, const void* key_cache, const void* value_cache,
                            const int64_t* block_tables, const int64_t* token_request, const int64_t* positions,
                            void* output, float* workspace, const PagedAttentionShape& shape, float scale,
                            bool is_float, void* stream) {
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
  if (is_float) {
    launch<float>(query, key_cache, value_cache, block_tables, token_request, positions, output, workspace, shape,
                  scale, cuda_stream);
  } else {
    launch<__nv_bfloat16>(query, key_cache, value_cache, block_tables, token_request, positions, output, workspace,
                          shape, scale, cuda_stream);
  }
}

}  // namespace graphed::kernels
