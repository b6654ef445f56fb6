// kernels/paged_prefill_attention.cu — see kernels/paged_prefill_attention.h. Shared memory of a block (dynamic,
// above the 48 KiB default, so the attribute is raised once per device): the cache offsets of two chunks, two
// chunks of keys and of values ([64][head_dim + 8] bf16: the pad spreads a column's rows over the banks), and per
// computing warp a score area ([16][68] fp32: the scores, then P V a quarter at a time; first the query rows
// while they load into fragments) and a P area ([16][72] bf16). A lane owns one row of its warp's 16 (lane / 2)
// and, of every 64 columns, the pairs 4k + 2 (lane % 2): its row's max, sum and output columns stay in its
// registers, the row's two lanes meet by one shuffle, and its float2 reads of the score area meet no bank twice.
#include "graphed/kernels/paged_prefill_attention.h"

#include <cuda_bf16.h>
#include <cuda_pipeline.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <mutex>

#include "graphed/kernels/detail/programmatic_launch.cuh"
#include "graphed/kernels/prefill_tiles.h"

namespace graphed::kernels {
namespace {

namespace wmma = nvcuda::wmma;
using Bf16 = __nv_bfloat16;

constexpr int kRows = static_cast<int>(kPrefillTileTokens);  // a warp's query rows: the tile's tokens
constexpr int kChunk = 64;                                   // cache positions per step of the loop
constexpr int kMaxHeadsPerBlock = 8;                         // computing warps of a block at most
constexpr int kMinWarps = 4;                                 // warps that load a chunk at least
constexpr int kScoreStride = kChunk + 4;                     // floats per row of a score area
constexpr int kProbabilityStride = kChunk + 8;               // bf16 per row of a P area
constexpr int kOffsetsBytes = 2 * kChunk * static_cast<int>(sizeof(int64_t));
constexpr int kScoreBytes = kRows * kScoreStride * static_cast<int>(sizeof(float));
constexpr int kProbabilityBytes = kRows * kProbabilityStride * static_cast<int>(sizeof(Bf16));
constexpr int kWarpScratchBytes = kScoreBytes + kProbabilityBytes;
constexpr float kLog2E = 1.4426950408889634f;
static_assert(kScoreBytes % 32 == 0 && kProbabilityBytes % 32 == 0, "WMMA pointers are 32-byte aligned");

/// The layout of one head dimension's kernel: the rows it stages and the shared memory it takes.
template <int kHeadDim>
struct Dims {
  static_assert(kHeadDim % 32 == 0 && kHeadDim <= 128, "head_dim 32, 64, 96 or 128");
  static constexpr int kSteps = kHeadDim / 16;                 // WMMA steps along the head
  static constexpr int kPasses = (kSteps + 3) / 4;             // P V in quarters of 64 columns
  static constexpr int kVectors = kHeadDim / 8;                // 16-byte pieces of a row
  static constexpr int kRowStride = kHeadDim + 8;              // bf16 per staged row
  static constexpr int kStageBytes = kChunk * kRowStride * 2;  // one chunk of keys or of values
  static constexpr int kOutputs = kHeadDim / 2;                // output values a lane owns
  static_assert(kRows * kRowStride * 2 <= kScoreBytes, "the query rows stage in the score area");
  static constexpr int shared_bytes(int heads_per_block) {
    return kOffsetsBytes + 4 * kStageBytes + heads_per_block * kWarpScratchBytes;
  }
};

struct Layout {
  int heads, groups, block_size, table_width;
  int heads_per_block;  ///< computing warps of a block
  float scale_log2;     ///< the softmax scale times log2(e): scores are exponentiated with exp2f
};

/// What a block knows of its tile, read from the step before its first chunk.
struct Tile {
  int64_t first_token;
  int length;
  int64_t request;
  int64_t context;  ///< positions 0..context - 1 are read: the largest position of the tile + 1
};

__device__ Tile read_tile(const int64_t* tiles, const int64_t* token_request, const int64_t* positions) {
  const int64_t* row = tiles + static_cast<int64_t>(blockIdx.x) * kPrefillTileFields;
  Tile tile;
  tile.first_token = row[0];
  tile.length = static_cast<int>(min(row[3], int64_t{kRows}));  // the planner never makes a longer row
  tile.request = tile.length > 0 ? token_request[tile.first_token] : 0;
  tile.context = 0;
  for (int r = 0; r < tile.length; ++r) tile.context = max(tile.context, positions[tile.first_token + r] + 1);
  return tile;
}

/// offsets[j] (elements) of the cache row of position first + j of the tile's request, -1 past its context.
template <int kHeadDim>
__device__ void find_chunk_rows(const int64_t* block_tables, const Tile& tile, const Layout& layout, int group,
                                int64_t first, int64_t* offsets) {
  const int64_t* table = block_tables + tile.request * layout.table_width;
  for (int j = threadIdx.x; j < kChunk; j += blockDim.x) {
    const int64_t position = first + j;
    if (position >= tile.context) {
      offsets[j] = -1;
      continue;
    }
    const int64_t block = table[position / layout.block_size];
    offsets[j] = ((block * layout.block_size + position % layout.block_size) * layout.groups + group) * kHeadDim;
  }
}

/// The whole block copies a chunk's keys and values into shared memory, asynchronously (the caller commits and
/// waits); rows past the context become zeros, so that their zero weights meet no stale NaN.
template <int kHeadDim>
__device__ void load_chunk(const Bf16* key_cache, const Bf16* value_cache, const int64_t* offsets, Bf16* keys,
                           Bf16* values) {
  using D = Dims<kHeadDim>;
  for (int i = threadIdx.x; i < kChunk * D::kVectors; i += blockDim.x) {
    const int j = i / D::kVectors;
    const int piece = (i % D::kVectors) * 8;
    Bf16* key_target = keys + j * D::kRowStride + piece;
    Bf16* value_target = values + j * D::kRowStride + piece;
    const int64_t offset = offsets[j];
    if (offset >= 0) {
      __pipeline_memcpy_async(key_target, key_cache + offset + piece, 16);
      __pipeline_memcpy_async(value_target, value_cache + offset + piece, 16);
    } else {
      *reinterpret_cast<uint4*>(key_target) = make_uint4(0, 0, 0, 0);
      *reinterpret_cast<uint4*>(value_target) = make_uint4(0, 0, 0, 0);
    }
  }
}

template <int kHeadDim>
struct QueryFragments {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, Bf16, wmma::row_major> step[Dims<kHeadDim>::kSteps];
};

/// A warp's 16 query rows of one head (zeros for rows past the tile), staged through `stage` into fragments.
template <int kHeadDim>
__device__ void load_queries(const Bf16* query, const Tile& tile, int heads, int head, Bf16* stage,
                             QueryFragments<kHeadDim>& q) {
  using D = Dims<kHeadDim>;
  const int lane = threadIdx.x & 31;
  for (int i = lane; i < kRows * D::kVectors; i += 32) {
    const int r = i / D::kVectors;
    const int piece = (i % D::kVectors) * 8;
    uint4 value = make_uint4(0, 0, 0, 0);
    if (r < tile.length) {
      value = *reinterpret_cast<const uint4*>(query + ((tile.first_token + r) * heads + head) * kHeadDim + piece);
    }
    *reinterpret_cast<uint4*>(stage + r * D::kRowStride + piece) = value;
  }
  __syncwarp();
#pragma unroll
  for (int k = 0; k < D::kSteps; ++k) wmma::load_matrix_sync(q.step[k], stage + k * 16, D::kRowStride);
  __syncwarp();  // the stage becomes the score area
}

/// One lane's state of its row: the running max (log2 units) and sum, and its output columns
/// (pass p, pair k: columns 64 p + 4 k + 2 (lane % 2) and the one after).
template <int kHeadDim>
struct RowState {
  float max = -INFINITY;
  float sum = 0.0f;
  float output[Dims<kHeadDim>::kOutputs];
};

/// scores[16][64] = Q K^T of the chunk, in the warp's score area.
template <int kHeadDim>
__device__ void score_chunk(const QueryFragments<kHeadDim>& q, const Bf16* keys, float* scores) {
  using D = Dims<kHeadDim>;
#pragma unroll
  for (int n = 0; n < kChunk / 16; ++n) {
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> s;
    wmma::fill_fragment(s, 0.0f);
#pragma unroll
    for (int k = 0; k < D::kSteps; ++k) {
      wmma::fragment<wmma::matrix_b, 16, 16, 16, Bf16, wmma::col_major> key;  // K^T: key n, dimension k
      wmma::load_matrix_sync(key, keys + n * 16 * D::kRowStride + k * 16, D::kRowStride);
      wmma::mma_sync(s, q.step[k], key, s);
    }
    wmma::store_matrix_sync(scores + n * 16, s, kScoreStride, wmma::mem_row_major);
  }
}

/// The online-softmax step of the lane's row over the chunk's scores: masks the keys past `position`, writes
/// P = exp2(score - new max) as bf16, updates max and sum; returns the factor the output is rescaled by.
template <int kHeadDim>
__device__ float softmax_step(const float* scores, Bf16* probabilities, int64_t first, int64_t position,
                              float scale_log2, RowState<kHeadDim>& state) {
  const int lane = threadIdx.x & 31;
  const int column = 2 * (lane & 1);
  const float* row = scores + (lane >> 1) * kScoreStride + column;
  float x[kChunk / 2];
  float chunk_max = -INFINITY;
#pragma unroll
  for (int k = 0; k < kChunk / 4; ++k) {
    const float2 s = *reinterpret_cast<const float2*>(row + 4 * k);
    const int64_t key = first + 4 * k + column;
    x[2 * k] = key <= position ? s.x * scale_log2 : -INFINITY;
    x[2 * k + 1] = key + 1 <= position ? s.y * scale_log2 : -INFINITY;
    chunk_max = fmaxf(chunk_max, fmaxf(x[2 * k], x[2 * k + 1]));
  }
  chunk_max = fmaxf(chunk_max, __shfl_xor_sync(0xffffffffu, chunk_max, 1));
  const float new_max = fmaxf(state.max, chunk_max);  // finite: every row sees position 0 in the first chunk
  const float rescale = exp2f(state.max - new_max);   // 0 at the first chunk, 1 where the chunk is masked
  Bf16* p_row = probabilities + (lane >> 1) * kProbabilityStride + column;
  float total = 0.0f;
#pragma unroll
  for (int k = 0; k < kChunk / 4; ++k) {
    const float p0 = exp2f(x[2 * k] - new_max);
    const float p1 = exp2f(x[2 * k + 1] - new_max);
    total += p0 + p1;
    *reinterpret_cast<__nv_bfloat162*>(p_row + 4 * k) = __floats2bfloat162_rn(p0, p1);
  }
  total += __shfl_xor_sync(0xffffffffu, total, 1);
  state.sum = state.sum * rescale + total;
  state.max = new_max;
  return rescale;
}

/// output = rescale output + P V, a pass of (up to) 64 columns at a time through the score area.
template <int kHeadDim>
__device__ void accumulate_values(const Bf16* probabilities, const Bf16* values, float* area, float rescale,
                                  RowState<kHeadDim>& state) {
  using D = Dims<kHeadDim>;
  const int lane = threadIdx.x & 31;
  const float* row = area + (lane >> 1) * kScoreStride + 2 * (lane & 1);
  wmma::fragment<wmma::matrix_a, 16, 16, 16, Bf16, wmma::row_major> p[kChunk / 16];
#pragma unroll
  for (int k = 0; k < kChunk / 16; ++k) wmma::load_matrix_sync(p[k], probabilities + k * 16, kProbabilityStride);
#pragma unroll
  for (int pass = 0; pass < D::kPasses; ++pass) {
    const int blocks = min(4, D::kSteps - pass * 4);  // 16-column blocks of this pass
#pragma unroll
    for (int n = 0; n < 4; ++n) {
      if (n >= blocks) break;
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> sum;
      wmma::fill_fragment(sum, 0.0f);
#pragma unroll
      for (int k = 0; k < kChunk / 16; ++k) {
        wmma::fragment<wmma::matrix_b, 16, 16, 16, Bf16, wmma::row_major> value;  // key k, column n
        wmma::load_matrix_sync(value, values + k * 16 * D::kRowStride + (pass * 4 + n) * 16, D::kRowStride);
        wmma::mma_sync(sum, p[k], value, sum);
      }
      wmma::store_matrix_sync(area + n * 16, sum, kScoreStride, wmma::mem_row_major);
    }
    __syncwarp();
#pragma unroll
    for (int k = 0; k < 16; ++k) {
      if (k >= blocks * 4) break;
      const float2 v = *reinterpret_cast<const float2*>(row + 4 * k);
      float* out = state.output + pass * 32 + 2 * k;
      out[0] = out[0] * rescale + v.x;
      out[1] = out[1] * rescale + v.y;
    }
    __syncwarp();  // the area takes the next pass (or the next chunk's scores)
  }
}

/// The lane's row divided by its sum, as bf16 into output [tokens, heads, head_dim] (rows of the tile only).
template <int kHeadDim>
__device__ void write_row(const RowState<kHeadDim>& state, const Tile& tile, int heads, int head, Bf16* output) {
  const int lane = threadIdx.x & 31;
  const int r = lane >> 1;
  if (r >= tile.length) return;
  Bf16* out = output + ((tile.first_token + r) * heads + head) * kHeadDim + 2 * (lane & 1);
#pragma unroll
  for (int i = 0; i < Dims<kHeadDim>::kOutputs / 2; ++i) {
    const int column = (i / 16) * 64 + 4 * (i % 16);
    *reinterpret_cast<__nv_bfloat162*>(out + column) =
        __floats2bfloat162_rn(state.output[2 * i] / state.sum, state.output[2 * i + 1] / state.sum);
  }
}

/// A block per (tile row, group x head subset); see the header. Warps past the subset's heads only load.
template <int kHeadDim>
__global__ void __launch_bounds__(kMaxHeadsPerBlock * 32)
    paged_prefill_attention_kernel(const Bf16* query, const Bf16* key_cache, const Bf16* value_cache,
                                   const int64_t* block_tables, const int64_t* token_request, const int64_t* positions,
                                   const int64_t* tiles, Bf16* output, Layout layout) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();  // bf16 WMMA needs sm_80; paged_prefill_attention_fits is not asked about the device
#else
  using D = Dims<kHeadDim>;
  extern __shared__ __align__(128) unsigned char shared[];
  detail::wait_for_previous_kernel();
  detail::let_next_kernel_start();
  const Tile tile = read_tile(tiles, token_request, positions);
  if (tile.length <= 0) return;  // an unused row
  const int ratio = layout.heads / layout.groups;
  const int subsets = (ratio + layout.heads_per_block - 1) / layout.heads_per_block;
  const int group = static_cast<int>(blockIdx.y) / subsets;
  const int warp = threadIdx.x >> 5;
  const int in_group = (static_cast<int>(blockIdx.y) % subsets) * layout.heads_per_block + warp;
  const bool computes = warp < layout.heads_per_block && in_group < ratio;
  const int head = group * ratio + in_group;
  int64_t* offsets = reinterpret_cast<int64_t*>(shared);  // [2][kChunk]
  Bf16* keys = reinterpret_cast<Bf16*>(shared + kOffsetsBytes);
  Bf16* values = keys + 2 * kChunk * D::kRowStride;
  unsigned char* scratch = shared + kOffsetsBytes + 4 * D::kStageBytes + warp * kWarpScratchBytes;
  float* scores = reinterpret_cast<float*>(scratch);
  Bf16* probabilities = reinterpret_cast<Bf16*>(scratch + kScoreBytes);
  const int chunks = static_cast<int>((tile.context + kChunk - 1) / kChunk);
  find_chunk_rows<kHeadDim>(block_tables, tile, layout, group, 0, offsets);
  __syncthreads();
  load_chunk<kHeadDim>(key_cache, value_cache, offsets, keys, values);
  __pipeline_commit();
  QueryFragments<kHeadDim> q;
  RowState<kHeadDim> state;
#pragma unroll
  for (int i = 0; i < D::kOutputs; ++i) state.output[i] = 0.0f;
  if (computes) load_queries(query, tile, layout.heads, head, reinterpret_cast<Bf16*>(scores), q);
  const int row = (threadIdx.x & 31) >> 1;  // rows past the tile repeat its first token's position
  const int64_t position = positions[tile.first_token + (row < tile.length ? row : 0)];
  for (int c = 0; c < chunks; ++c) {
    const int next = (c + 1) & 1;
    if (c + 1 < chunks)
      find_chunk_rows<kHeadDim>(block_tables, tile, layout, group, (c + 1) * int64_t{kChunk}, offsets + next * kChunk);
    __syncthreads();  // the next chunk's offsets are there, and every warp is done with the buffers they load into
    if (c + 1 < chunks) {
      load_chunk<kHeadDim>(key_cache, value_cache, offsets + next * kChunk, keys + next * kChunk * D::kRowStride,
                           values + next * kChunk * D::kRowStride);
    }
    __pipeline_commit();
    __pipeline_wait_prior(1);  // this chunk's copies have landed (the next chunk's may still be in flight)
    __syncthreads();
    if (!computes) continue;
    const Bf16* chunk_keys = keys + (c & 1) * kChunk * D::kRowStride;
    score_chunk(q, chunk_keys, scores);
    __syncwarp();
    const float rescale = softmax_step(scores, probabilities, c * int64_t{kChunk}, position, layout.scale_log2, state);
    __syncwarp();
    accumulate_values(probabilities, values + (c & 1) * kChunk * D::kRowStride, scores, rescale, state);
  }
  if (computes) write_row(state, tile, layout.heads, head, output);
#endif
}

/// The kernel's shared memory above the 48 KiB default, asked once per device (the attribute stays).
template <int kHeadDim>
void allow_shared_memory() {
  constexpr int kDevices = 64;
  static std::array<std::once_flag, kDevices> done;
  int device = 0;
  cudaGetDevice(&device);
  std::call_once(done[static_cast<std::size_t>(std::clamp(device, 0, kDevices - 1))], [] {
    detail::check_launch(
        cudaFuncSetAttribute(paged_prefill_attention_kernel<kHeadDim>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             Dims<kHeadDim>::shared_bytes(kMaxHeadsPerBlock)),
        "paged_prefill_attention_kernel (its shared memory opt-in)");
  });
}

template <int kHeadDim>
void launch(const Bf16* query, const Bf16* key_cache, const Bf16* value_cache, const int64_t* block_tables,
            const int64_t* token_request, const int64_t* positions, const int64_t* tiles, Bf16* output,
            const PagedPrefillShape& shape, float scale, cudaStream_t stream) {
  const int ratio = static_cast<int>(shape.heads / shape.groups);
  Layout layout{static_cast<int>(shape.heads),      static_cast<int>(shape.groups),
                static_cast<int>(shape.block_size), static_cast<int>(shape.table_width),
                std::min(ratio, kMaxHeadsPerBlock), scale * kLog2E};
  const int subsets = (ratio + layout.heads_per_block - 1) / layout.heads_per_block;
  const dim3 grid(static_cast<unsigned>(shape.tiles), static_cast<unsigned>(shape.groups * subsets));
  const dim3 block(32 * std::max(layout.heads_per_block, kMinWarps));
  allow_shared_memory<kHeadDim>();
  detail::launch_programmatic("paged_prefill_attention_kernel", paged_prefill_attention_kernel<kHeadDim>, grid, block,
                              static_cast<size_t>(Dims<kHeadDim>::shared_bytes(layout.heads_per_block)), stream, query,
                              key_cache, value_cache, block_tables, token_request, positions, tiles, output, layout);
}

}  // namespace

bool paged_prefill_attention_fits(int64_t heads, int64_t groups, int64_t head_dim) {
  return groups > 0 && heads % groups == 0 && head_dim % 32 == 0 && head_dim >= 32 && head_dim <= 128;
}

void launch_paged_prefill_attention(const void* query, const void* key_cache, const void* value_cache,
                                    const int64_t* block_tables, const int64_t* token_request, const int64_t* positions,
                                    const int64_t* tiles, void* output, const PagedPrefillShape& shape, float scale,
                                    void* stream) {
  if (shape.tiles == 0) return;
  const auto q = static_cast<const Bf16*>(query);
  const auto k = static_cast<const Bf16*>(key_cache);
  const auto v = static_cast<const Bf16*>(value_cache);
  const auto out = static_cast<Bf16*>(output);
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
  switch (shape.head_dim) {
    case 32: return launch<32>(q, k, v, block_tables, token_request, positions, tiles, out, shape, scale, cuda_stream);
    case 64: return launch<64>(q, k, v, block_tables, token_request, positions, tiles, out, shape, scale, cuda_stream);
    case 96: return launch<96>(q, k, v, block_tables, token_request, positions, tiles, out, shape, scale, cuda_stream);
    case 128:
      return launch<128>(q, k, v, block_tables, token_request, positions, tiles, out, shape, scale, cuda_stream);
    default:
      throw ::graphed::Error(::graphed::detail::concat(
          "paged prefill attention takes head_dim 32, 64, 96 or 128, got ", shape.head_dim,
          "; fix: ask paged_prefill_attention_fits before launching (the op falls back to the split kernel)"));
  }
}

}  // namespace graphed::kernels
