// kernels/paged_attention.cu — see kernels/paged_attention.h. Pass one: a thread block per (token,
// group, split) loads the group's queries (heads / groups of them) once, scores every key of its split
// against all of them (one thread per key, 16-byte loads), then sums the values per head; it writes
// each head's running maximum, exponent sum and unnormalised output. Pass two: a thread block per
// (token, head) folds the splits that hold its positions together, in split order. fp32 arithmetic
// throughout. Both are programmatic dependent launches.
#include "graphed/kernels/paged_attention.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "graphed/kernels/detail/bf16_vectors.cuh"
#include "graphed/kernels/detail/block_reduce.cuh"
#include "graphed/kernels/detail/programmatic_launch.cuh"

namespace graphed::kernels {
namespace {

using detail::block_reduce;

constexpr int kThreads = 128;
constexpr int kMaxHeadsPerGroup = 16;
constexpr int kMaxHeadDim = 256;
constexpr int kSplit = static_cast<int>(kPagedAttentionSplit);

__device__ __forceinline__ void load_eight(const __nv_bfloat16* source, float* values) { detail::load_eight(source, values); }
__device__ __forceinline__ void load_eight(const float* source, float* values) {
  const float4 first = *reinterpret_cast<const float4*>(source);
  const float4 second = *reinterpret_cast<const float4*>(source + 4);
  values[0] = first.x, values[1] = first.y, values[2] = first.z, values[3] = first.w;
  values[4] = second.x, values[5] = second.y, values[6] = second.z, values[7] = second.w;
}
__device__ __forceinline__ float to_float(__nv_bfloat16 value) { return __bfloat162float(value); }
__device__ __forceinline__ float to_float(float value) { return value; }
__device__ __forceinline__ void store(__nv_bfloat16* target, float value) { *target = __float2bfloat16(value); }
__device__ __forceinline__ void store(float* target, float value) { *target = value; }

struct Layout {
  int heads, groups, head_dim, block_size, table_width, splits;
};

/// Workspace of (token, head, split): [head_dim] output, then max, then sum.
__device__ __forceinline__ float* partial_of(float* workspace, const Layout& layout, int64_t token, int head, int split) {
  return workspace + ((token * layout.heads + head) * layout.splits + split) * (layout.head_dim + 2);
}

/// Where a position's key (and value) of one KV group sits in the paged cache.
struct CacheRows {
  const int64_t* table;  // the request's block table
  int block_size, groups, group, head_dim;
  __device__ __forceinline__ int64_t row_of(int64_t position) const {
    const int64_t block = table[position / block_size];
    return ((block * block_size + position % block_size) * groups + group) * head_dim;
  }
};

/// scores[h][j] = scale q_h . k_(first + j) for every head of the group: one thread per key, each key
/// loaded once for all heads.
template <typename Scalar>
__device__ void score_keys(const Scalar* key_cache, const CacheRows& rows, const float* q, int ratio, int64_t first,
                           int64_t length, float scale, float (*scores)[kSplit]) {
  const int vectors = rows.head_dim / 8;
  for (int j = threadIdx.x; j < length; j += blockDim.x) {
    const Scalar* key = key_cache + rows.row_of(first + j);
    float dots[kMaxHeadsPerGroup];
    for (int h = 0; h < ratio; ++h) dots[h] = 0.0f;
    for (int v = 0; v < vectors; ++v) {
      float k[8];
      load_eight(key + v * 8, k);
      for (int h = 0; h < ratio; ++h) {
#pragma unroll
        for (int e = 0; e < 8; ++e) dots[h] += q[h * rows.head_dim + v * 8 + e] * k[e];
      }
    }
    for (int h = 0; h < ratio; ++h) scores[h][j] = dots[h] * scale;
  }
}

template <typename Scalar>
__global__ void paged_attention_split_kernel(const Scalar* query, const Scalar* key_cache, const Scalar* value_cache,
                                             const int64_t* block_tables, const int64_t* token_request,
                                             const int64_t* positions, float* workspace, Layout layout, float scale) {
  __shared__ float q[kMaxHeadsPerGroup * kMaxHeadDim];  // 16 KiB; with the scores 36 KiB of static memory
  __shared__ float scores[kMaxHeadsPerGroup][kSplit];
  __shared__ float partial[kThreads * 8];
  __shared__ float scratch[32];
  detail::wait_for_previous_kernel();
  detail::let_next_kernel_start();
  const int64_t token = blockIdx.x;
  const int group = blockIdx.y;
  const int split = blockIdx.z;
  const int ratio = layout.heads / layout.groups;
  const int head_dim = layout.head_dim;
  const int64_t count = positions[token] + 1;
  const int64_t first = static_cast<int64_t>(split) * kSplit;
  const int64_t length = count - first < kSplit ? count - first : kSplit;
  if (length <= 0) return;  // past the token's context: the combine reads only the splits before
  const Scalar* q_rows = query + (token * layout.heads + group * ratio) * head_dim;
  for (int i = threadIdx.x; i < ratio * head_dim; i += blockDim.x) q[i] = to_float(q_rows[i]);
  __syncthreads();
  const CacheRows rows{block_tables + token_request[token] * layout.table_width, layout.block_size, layout.groups,
                       group, head_dim};
  score_keys(key_cache, rows, q, ratio, first, length, scale, scores);
  __syncthreads();
  const int vectors = head_dim / 8;
  const int lanes = blockDim.x / vectors;  // positions summed side by side
  const int lane = threadIdx.x / vectors;
  const int slice = threadIdx.x % vectors;
  for (int h = 0; h < ratio; ++h) {
    const float2 softmax = detail::block_exponentiate(scores[h], length, scratch);
    const float largest = softmax.x;
    const float total = softmax.y;
    float sum[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    if (lane < lanes) {
      for (int j = lane; j < length; j += lanes) {
        float value[8];
        load_eight(value_cache + rows.row_of(first + j) + slice * 8, value);
        const float weight = scores[h][j];
#pragma unroll
        for (int e = 0; e < 8; ++e) sum[e] += weight * value[e];
      }
#pragma unroll
      for (int e = 0; e < 8; ++e) partial[lane * head_dim + slice * 8 + e] = sum[e];
    }
    __syncthreads();
    float* out = partial_of(workspace, layout, token, group * ratio + h, split);
    for (int i = threadIdx.x; i < head_dim; i += blockDim.x) {
      float value = 0.0f;
      for (int l = 0; l < lanes; ++l) value += partial[l * head_dim + i];
      out[i] = value;
    }
    if (threadIdx.x == 0) {
      out[head_dim] = largest;
      out[head_dim + 1] = total;
    }
    __syncthreads();  // `partial` and `scratch` are reused by the next head
  }
}

/// Folds the splits that hold positions of the token (ceil((position + 1) / kSplit) of them).
template <typename Scalar>
__global__ void paged_attention_combine_kernel(const int64_t* positions, const float* workspace, Scalar* output,
                                               Layout layout) {
  detail::wait_for_previous_kernel();
  detail::let_next_kernel_start();
  const int64_t token = blockIdx.x;
  const int head = blockIdx.y;
  const int head_dim = layout.head_dim;
  const int splits = min(static_cast<int>(positions[token] / kSplit) + 1, layout.splits);
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
  Layout layout{static_cast<int>(shape.heads), static_cast<int>(shape.groups), static_cast<int>(shape.head_dim),
                static_cast<int>(shape.block_size), static_cast<int>(shape.table_width),
                static_cast<int>((shape.max_context + kSplit - 1) / kSplit)};
  const dim3 split_grid(static_cast<unsigned>(shape.tokens), static_cast<unsigned>(shape.groups),
                        static_cast<unsigned>(layout.splits));
  detail::launch_programmatic(paged_attention_split_kernel<Scalar>, split_grid, dim3(kThreads), 0, stream,
                              static_cast<const Scalar*>(query), static_cast<const Scalar*>(key_cache),
                              static_cast<const Scalar*>(value_cache), block_tables, token_request, positions,
                              workspace, layout, scale);
  const dim3 combine_grid(static_cast<unsigned>(shape.tokens), static_cast<unsigned>(shape.heads));
  detail::launch_programmatic(paged_attention_combine_kernel<Scalar>, combine_grid, dim3(64), 0, stream, positions,
                              static_cast<const float*>(workspace), static_cast<Scalar*>(output), layout);
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
