// kernels/gumbel_max.cu — see kernels/gumbel_max.h. A grid of (column slices, rows); each block scans its slice
// twice. The first pass takes the columns whose noise falls in the top bucket (1 in 256) and computes their
// values; the best of those bounds what the others can reach, so the second pass computes the noise only of
// columns whose scaled logit comes within gumbel_below_top() of it. Each block offers its best key (the value,
// then the first column) to its row's slot with a 64-bit atomicMax, so the result does not depend on the order
// the blocks run in; a last small kernel turns each row's key into its column.
#include "graphed/kernels/gumbel_max.h"

#include <cuda_runtime.h>

#include <cstdint>

#include "graphed/kernels/detail/gumbel_noise.h"
#include "graphed/kernels/detail/launch_check.h"

namespace graphed::kernels {
namespace {

using Key = unsigned long long;

constexpr int kThreads = 256;
constexpr int64_t kSlice = 8192;  // columns a block scans

__device__ __forceinline__ Key larger(Key a, Key b) { return a > b ? a : b; }

__device__ __forceinline__ Key warp_max_key(Key key) {
  for (int offset = 16; offset > 0; offset >>= 1) key = larger(key, __shfl_xor_sync(0xffffffffu, key, offset));
  return key;
}

/// The largest key of the block; every thread gets it.
__device__ Key block_max_key(Key key, Key* scratch) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  key = warp_max_key(key);
  __syncthreads();  // scratch may still be read by the previous reduction
  if (lane == 0) scratch[warp] = key;
  __syncthreads();
  return warp_max_key(lane < kThreads / 32 ? scratch[lane] : 0ull);
}

__device__ __forceinline__ Key key_of(float value, int64_t column) {
  return detail::candidate_key(__float_as_uint(value), column);
}

/// Columns [begin, end) of one row, sampled: the top bucket's columns, then those that can still beat them.
/// `floor`: the key of the row's smallest drawable (value, column), 0 when every column is drawn.
__device__ Key sampled_key(const float* logits, int64_t begin, int64_t end, float temperature, Key floor,
                           uint32_t state, float below_top, Key* scratch) {
  Key best = 0;
  for (int64_t column = begin + threadIdx.x; column < end; column += kThreads) {
    const uint32_t bits = detail::noise_bits(state, column);
    if (bits < detail::kTopNoiseBucket) continue;
    const float scaled = logits[column] / temperature;
    if (key_of(scaled, column) >= floor) best = larger(best, key_of(scaled + detail::gumbel_of(bits), column));
  }
  const float reach = __uint_as_float(detail::float_bits_of_key(block_max_key(best, scratch)));
  for (int64_t column = begin + threadIdx.x; column < end; column += kThreads) {
    const float scaled = logits[column] / temperature;
    if (scaled + below_top < reach || key_of(scaled, column) < floor) continue;  // cannot win, or cut by the filters
    const uint32_t bits = detail::noise_bits(state, column);
    if (bits >= detail::kTopNoiseBucket) continue;  // the first pass took it
    best = larger(best, key_of(scaled + detail::gumbel_of(bits), column));
  }
  return best;
}

__global__ void __launch_bounds__(kThreads) gumbel_max_kernel(const float* logits, int64_t row_stride, int64_t columns,
                                                              GumbelMaxRows settings, float below_top, Key* keys) {
  __shared__ Key scratch[kThreads / 32];
  const int64_t row = blockIdx.y;
  const int64_t begin = static_cast<int64_t>(blockIdx.x) * kSlice;
  const int64_t end = begin + kSlice < columns ? begin + kSlice : columns;
  const float* row_logits = logits + row * row_stride;
  const double temperature = settings.temperature[row];
  Key best = 0;
  if (temperature > 0.0) {
    const Key floor =
        settings.threshold != nullptr ? key_of(settings.threshold[row], settings.threshold_column[row]) : 0ull;
    const uint32_t state = detail::noise_row_state(static_cast<uint32_t>(settings.seed_state[row]), settings.draw[row],
                                                   settings.row_word_is_index ? static_cast<uint32_t>(row) : 0u);
    best = sampled_key(row_logits, begin, end, static_cast<float>(temperature), floor, state, below_top, scratch);
  } else {
    for (int64_t column = begin + threadIdx.x; column < end; column += kThreads) {
      best = larger(best, key_of(row_logits[column], column));
    }
  }
  best = block_max_key(best, scratch);
  if (threadIdx.x == 0 && best != 0) atomicMax(&keys[row], best);
}

__global__ void columns_of_keys(int64_t rows, int64_t* out) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row < rows) out[row] = detail::column_of_key(static_cast<uint64_t>(out[row]));
}

}  // namespace

void launch_gumbel_max(const float* logits, int64_t row_stride, int64_t rows, int64_t columns,
                       const GumbelMaxRows& settings, float below_top, int64_t* out, void* stream) {
  if (rows == 0 || columns == 0) return;
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
  detail::check_launch(
      cudaMemsetAsync(out, 0, static_cast<size_t>(rows) * sizeof(int64_t), cuda_stream),  // the empty key
      "gumbel_max_kernel (the memset of its keys)");
  const dim3 grid(static_cast<unsigned>((columns + kSlice - 1) / kSlice), static_cast<unsigned>(rows));
  gumbel_max_kernel<<<grid, kThreads, 0, cuda_stream>>>(logits, row_stride, columns, settings, below_top,
                                                        reinterpret_cast<Key*>(out));
  detail::check_launch("gumbel_max_kernel");
  columns_of_keys<<<static_cast<unsigned>((rows + 255) / 256), 256, 0, cuda_stream>>>(rows, out);
  detail::check_launch("columns_of_keys");
}

}  // namespace graphed::kernels
