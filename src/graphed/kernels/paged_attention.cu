// kernels/paged_attention.cu — see kernels/paged_attention.h. Pass one: a block of four warps per (token, group,
// split lane) loads the group's queries, then for each of its splits (z, z + Z, ...: a launch holds about 8,192
// blocks) finds the split's 256 cache rows once, scores them for every head of the group (a thread per key, read
// once for all the heads, 16-byte loads, eight in flight), takes each head's softmax step (a warp per head) and sums
// the values (a thread per (head, eight-value slice) pair and a share of the positions: the lanes of a warp read each
// row once for all the heads), folding the parts in a fixed order; it writes each head's max, exponent sum and
// unnormalised output. Pass two: a thread block per (token, head) folds the splits that hold its positions together,
// in split order. fp32 arithmetic throughout; a split's result never depends on the grid. Both are programmatic
// dependent launches. A token whose positions all lie in the first split gets its output from pass one (divided by
// its sum as pass two would), and a launch whose context fits one split has no pass two. Given a split count (a
// device int64), both passes skip the tokens at or past it, which the tile kernel of
// kernels/paged_prefill_attention.h writes. (Before issue 44's work, blocks of eight warps read a key once per head
// and held 128 registers a thread, two blocks a multiprocessor: 450-570 GB/s at batch 256 on an H200, against
// 1,250-1,510 now. Tried and dropped, 2026-11-28: a thread per value slice of whole rows summing four heads at once,
// with the values prefetched into L2 while the keys are scored: 20-25% slower at head dim 64, 8% faster at 128.
// docs/benchmarks.md, "Serving under load".)
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

constexpr int kWarps = 4;  // warps of a split block
constexpr int kThreads = kWarps * 32;
constexpr int kMaxHeadsPerGroup = 16;
constexpr int kMaxHeadDim = 256;
constexpr int kSplit = static_cast<int>(kPagedAttentionSplit);
constexpr int kScoreStride = kSplit + 1;     // a head's scores: heads of one position fall in different banks
constexpr int kValuesInFlight = 8;           // value rows a thread loads before it uses the first
constexpr int kBlocksPerMultiprocessor = 5;  // resident split blocks asked of the compiler (up to 96 registers)
/// Split blocks a launch holds at most: about four per resident block of a 132-multiprocessor GPU (16 blocks of
/// 128 threads each); past that a block takes several splits.
constexpr int64_t kTargetBlocks = 8192;

__device__ __forceinline__ float to_float(__nv_bfloat16 value) { return __bfloat162float(value); }
__device__ __forceinline__ float to_float(float value) { return value; }
__device__ __forceinline__ void store(__nv_bfloat16* target, float value) { *target = __float2bfloat16(value); }
__device__ __forceinline__ void store(float* target, float value) { *target = value; }

/// Eight values of a cache row as one load (16 bytes of bf16, 32 of float), unpacked to floats where used, so that
/// loads in flight hold registers of the stored width.
template <typename Scalar>
struct Eight;
template <>
struct Eight<__nv_bfloat16> {
  uint4 bits;
  __device__ __forceinline__ void load(const __nv_bfloat16* source) { bits = *reinterpret_cast<const uint4*>(source); }
  __device__ __forceinline__ void unpack(float (&values)[8]) const { detail::unpack_eight(bits, values); }
};
template <>
struct Eight<float> {
  float4 first, second;
  __device__ __forceinline__ void load(const float* source) {
    first = reinterpret_cast<const float4*>(source)[0];
    second = reinterpret_cast<const float4*>(source)[1];
  }
  __device__ __forceinline__ void unpack(float (&values)[8]) const {
    values[0] = first.x, values[1] = first.y, values[2] = first.z, values[3] = first.w;
    values[4] = second.x, values[5] = second.y, values[6] = second.z, values[7] = second.w;
  }
};

struct Layout {
  int heads, groups, head_dim, block_size, table_width, splits;
};

/// Workspace of (token, head, split): [head_dim] output, then max, then sum.
__device__ __forceinline__ float* partial_of(float* workspace, const Layout& layout, int64_t token, int head,
                                             int split) {
  return workspace + ((token * layout.heads + head) * layout.splits + split) * (layout.head_dim + 2);
}

/// A split block's shared memory (dynamic, sized by the group's heads and the head dimension).
struct Shared {
  int64_t* offsets;  ///< [kSplit] where each position's row of the group starts in the cache (elements)
  float* q;          ///< [ratio][head_dim] the group's queries
  float* scores;     ///< [ratio][kScoreStride] scaled scores, then the softmax weights
  float* sums;       ///< [ratio][head_dim] the weighted value sums, folded over the block's parts
  float* softmax;    ///< [ratio][2] each head's max and exponent sum
};

__host__ __device__ constexpr int64_t shared_bytes(int64_t ratio, int64_t head_dim) {
  return kSplit * 8 + 4 * (2 * ratio * head_dim + ratio * kScoreStride + 2 * ratio);
}

__device__ __forceinline__ Shared carve(unsigned char* memory, int ratio, int head_dim) {
  Shared shared;
  shared.offsets = reinterpret_cast<int64_t*>(memory);
  shared.q = reinterpret_cast<float*>(memory + kSplit * 8);
  shared.scores = shared.q + ratio * head_dim;
  shared.sums = shared.scores + ratio * kScoreStride;
  shared.softmax = shared.sums + ratio * head_dim;
  return shared;
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

/// scores[h][j] = scale q_h . k_j over the split: a thread per position (j = thread, thread + kThreads, ...), whose
/// key is read once for every head of the group, 64 values (eight loads in flight) at a time.
template <typename Scalar>
__device__ void score_split(const Scalar* key_cache, const Shared& shared, int length, int ratio, int head_dim,
                            float scale) {
  for (int j = threadIdx.x; j < length; j += kThreads) {
    const Scalar* row = key_cache + shared.offsets[j];
    for (int chunk = 0; chunk < head_dim; chunk += 64) {
      const int vectors = min(8, (head_dim - chunk) / 8);
      Eight<Scalar> key[8];
#pragma unroll
      for (int c = 0; c < 8; ++c) {
        if (c < vectors) key[c].load(row + chunk + c * 8);
      }
      for (int h = 0; h < ratio; ++h) {
        const float* q = shared.q + h * head_dim + chunk;
        float dot = chunk == 0 ? 0.0f : shared.scores[h * kScoreStride + j];
#pragma unroll
        for (int c = 0; c < 8; ++c) {
          if (c >= vectors) break;
          float values[8];
          key[c].unpack(values);
#pragma unroll
          for (int e = 0; e < 8; ++e) dot += q[c * 8 + e] * values[e];
        }
        shared.scores[h * kScoreStride + j] = dot;
      }
    }
    for (int h = 0; h < ratio; ++h) shared.scores[h * kScoreStride + j] *= scale;
  }
}

/// Each head's max and exponent sum over the split (a warp per head: heads warp, warp + kWarps, ...), its scores
/// turned into the weights exp(score - max) in place.
__device__ void exponentiate_split(const Shared& shared, int length, int ratio) {
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  for (int h = warp; h < ratio; h += kWarps) {
    float* scores = shared.scores + h * kScoreStride;
    float largest = -INFINITY;
    for (int j = lane; j < length; j += 32) largest = fmaxf(largest, scores[j]);
    largest = detail::warp_max(largest);
    float total = 0.0f;
    for (int j = lane; j < length; j += 32) {
      const float weight = __expf(scores[j] - largest);
      scores[j] = weight;
      total += weight;
    }
    total = detail::warp_sum(total);
    if (lane == 0) {
      shared.softmax[2 * h] = largest;
      shared.softmax[2 * h + 1] = total;
    }
  }
}

/// How a warp's lanes share the (head, eight-value slice) pairs of the group: `per_pass` pairs at once, each
/// taken by `lanes_per_pair` lanes that split its positions; a block then has kWarps x lanes_per_pair parts.
struct PairPlan {
  int pairs, per_pass, lanes_per_pair;
  __device__ PairPlan(int ratio, int head_dim) {
    pairs = ratio * (head_dim / 8);
    per_pass = pairs < 32 && 32 % pairs == 0 ? pairs : 32;
    lanes_per_pair = 32 / per_pass;
  }
};

/// One pair's weighted sum of the value rows of positions part, part + parts, ... (value slices of eight,
/// kValuesInFlight loads in flight). Lanes of a warp with the same slice read the same 16 bytes, so a warp
/// reads each row it touches once for all the group's heads.
template <typename Scalar>
__device__ void sum_pair(const Scalar* value_cache, const Shared& shared, int length, int head, int slice, int part,
                         int parts, float (&sum)[8]) {
  const float* weights = shared.scores + head * kScoreStride;
  for (int j = part; j < length; j += kValuesInFlight * parts) {
    Eight<Scalar> value[kValuesInFlight];
#pragma unroll
    for (int c = 0; c < kValuesInFlight; ++c) {
      if (j + c * parts < length) value[c].load(value_cache + shared.offsets[j + c * parts] + slice * 8);
    }
#pragma unroll
    for (int c = 0; c < kValuesInFlight; ++c) {
      if (j + c * parts >= length) break;
      const float weight = weights[j + c * parts];
      float values[8];
      value[c].unpack(values);
#pragma unroll
      for (int e = 0; e < 8; ++e) sum[e] += weight * values[e];
    }
  }
}

/// sums[h] = the split's weighted sum of values for every head of the group: each part's sums, folded within a
/// warp by shuffles and across warps through shared memory, both in part order. Ends with a block barrier.
template <typename Scalar>
__device__ void sum_split_values(const Scalar* value_cache, const Shared& shared, int length, int ratio, int head_dim) {
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const PairPlan plan(ratio, head_dim);
  const int parts = kWarps * plan.lanes_per_pair;
  const int part = warp * plan.lanes_per_pair + lane / plan.per_pass;
  for (int first_pair = 0; first_pair < plan.pairs; first_pair += plan.per_pass) {
    const int pair = first_pair + lane % plan.per_pass;
    const bool active = pair < plan.pairs;
    float sum[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    if (active) {
      sum_pair(value_cache, shared, length, pair / (head_dim / 8), pair % (head_dim / 8), part, parts, sum);
    }
    float folded[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      folded[e] = 0.0f;
      for (int s = 0; s < plan.lanes_per_pair; ++s) {
        folded[e] += __shfl_sync(0xffffffffu, sum[e], lane % plan.per_pass + s * plan.per_pass);
      }
    }
    for (int w = 0; w < kWarps; ++w) {
      if (warp == w && active && lane < plan.per_pass) {
        float* out = shared.sums + pair * 8;  // = head * head_dim + slice * 8
#pragma unroll
        for (int e = 0; e < 8; ++e) out[e] = (w == 0 ? 0.0f : out[e]) + folded[e];
      }
      __syncthreads();
    }
  }
}

/// Writes the split's result for the group's heads: each head's partial (unnormalised output, max, sum) to the
/// workspace, or, for a token whose positions all lie in split 0 (`output_of_group` non-null), its normalised
/// output straight into the result (what the combine would compute from the one partial).
template <typename Scalar>
__device__ void write_split(const Shared& shared, int ratio, int head_dim, float* partial_of_group,
                            int64_t partial_stride, Scalar* output_of_group) {
  for (int index = threadIdx.x; index < ratio * head_dim; index += kThreads) {
    const int h = index / head_dim;
    const int i = index % head_dim;
    if (output_of_group != nullptr) {
      store(output_of_group + index, shared.sums[index] / shared.softmax[2 * h + 1]);
      continue;
    }
    float* partial = partial_of_group + h * partial_stride;
    partial[i] = shared.sums[index];
    if (i == 0) {
      partial[head_dim] = shared.softmax[2 * h];
      partial[head_dim + 1] = shared.softmax[2 * h + 1];
    }
  }
}

/// A block per (token, group, split lane): the group's queries in shared memory, then for each of the block's
/// splits (z, z + Z, ...) its cache rows, the scores of every head, their softmax step and the value sums.
template <typename Scalar>
__global__ void __launch_bounds__(kThreads, sizeof(Scalar) == 2 ? kBlocksPerMultiprocessor : 4)
    paged_attention_split_kernel(const Scalar* query, const Scalar* key_cache, const Scalar* value_cache,
                                 const int64_t* block_tables, const int64_t* token_request, const int64_t* positions,
                                 const int64_t* split_count, float* workspace, Scalar* output, Layout layout,
                                 float scale) {
  extern __shared__ __align__(16) unsigned char shared_memory[];
  detail::wait_for_previous_kernel();
  detail::let_next_kernel_start();
  const int64_t token = blockIdx.x;
  if (split_count != nullptr && token >= *split_count) return;  // a prompt token: the tile kernel's
  const int64_t count = positions[token] + 1;
  if (count <= static_cast<int64_t>(blockIdx.z) * kSplit) return;  // none of this block's splits holds a position
  const int group = blockIdx.y;
  const int ratio = layout.heads / layout.groups;
  const int head_dim = layout.head_dim;
  const Shared shared = carve(shared_memory, ratio, head_dim);
  const Scalar* q_rows = query + (token * layout.heads + group * ratio) * head_dim;
  for (int i = threadIdx.x; i < ratio * head_dim; i += kThreads) shared.q[i] = to_float(q_rows[i]);
  // Each split is written as its own partial, so the result does not depend on Z; past the token's context the
  // block stops (the combine reads only the splits before).
  for (int split = blockIdx.z; split < layout.splits; split += gridDim.z) {
    const int64_t first = static_cast<int64_t>(split) * kSplit;
    if (count <= first) break;
    const int length = static_cast<int>(count - first < kSplit ? count - first : kSplit);
    __syncthreads();  // the queries are in; the last split's shared memory is no longer read
    find_rows(block_tables, token_request, layout, token, group, first, length, shared.offsets);
    __syncthreads();
    score_split(key_cache, shared, length, ratio, head_dim, scale);
    __syncthreads();
    exponentiate_split(shared, length, ratio);
    __syncthreads();
    sum_split_values(value_cache, shared, length, ratio, head_dim);
    write_split(shared, ratio, head_dim, partial_of(workspace, layout, token, group * ratio, split),
                static_cast<int64_t>(layout.splits) * (head_dim + 2),
                count <= kSplit ? output + (token * layout.heads + group * ratio) * head_dim : nullptr);
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
  const int64_t shared = shared_bytes(shape.heads / shape.groups, shape.head_dim);
  static const bool room = [] {  // a group of 16 heads of 256 values takes more than the default 48 KiB
    detail::check_launch(
        cudaFuncSetAttribute(paged_attention_split_kernel<Scalar>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(shared_bytes(kMaxHeadsPerGroup, kMaxHeadDim))),
        "paged_attention_split_kernel (its shared memory)");
    return true;
  }();
  (void)room;
  detail::launch_programmatic("paged_attention_split_kernel", paged_attention_split_kernel<Scalar>, split_grid,
                              dim3(kThreads), static_cast<size_t>(shared), stream, static_cast<const Scalar*>(query),
                              static_cast<const Scalar*>(key_cache), static_cast<const Scalar*>(value_cache),
                              block_tables, token_request, positions, split_count, workspace,
                              static_cast<Scalar*>(output), layout, scale);
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
