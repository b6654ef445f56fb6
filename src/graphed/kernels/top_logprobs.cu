// kernels/top_logprobs.cu — see kernels/top_logprobs.h. Values are compared as order-preserving 32-bit keys (a
// float's bits, the sign bit flipped for positives and every bit for negatives), so the radix select works on
// unsigned digits; a NaN row is not expected (the model's logits are finite, masked ones -inf).
#include "graphed/kernels/top_logprobs.h"

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "graphed/kernels/detail/launch_check.h"

namespace graphed::kernels {
namespace {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;

__device__ __forceinline__ uint32_t key_of(float value) {
  const uint32_t bits = __float_as_uint(value);
  return (bits & 0x80000000u) != 0 ? ~bits : bits | 0x80000000u;
}

/// (max, sum of exp(x - max)) of two parts; an empty part is (-inf, 0).
__device__ __forceinline__ void combine(float& max, float& sum, float other_max, float other_sum) {
  const float larger = fmaxf(max, other_max);
  if (larger == -INFINITY) return;
  sum = (max == -INFINITY ? 0.0f : sum * __expf(max - larger)) +
        (other_max == -INFINITY ? 0.0f : other_sum * __expf(other_max - larger));
  max = larger;
}

/// The row's log of sum exp; every thread gets it.
__device__ float row_partition(const float* row, int64_t columns, float* scratch) {
  float max = -INFINITY;
  float sum = 0.0f;
  for (int64_t column = threadIdx.x; column < columns; column += kThreads) combine(max, sum, __ldg(row + column), 1.0f);
  for (int offset = 16; offset > 0; offset >>= 1) {
    combine(max, sum, __shfl_xor_sync(0xffffffffu, max, offset), __shfl_xor_sync(0xffffffffu, sum, offset));
  }
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  if (lane == 0) {
    scratch[warp] = max;
    scratch[kWarps + warp] = sum;
  }
  __syncthreads();
  if (warp == 0) {
    max = lane < kWarps ? scratch[lane] : -INFINITY;
    sum = lane < kWarps ? scratch[kWarps + lane] : 0.0f;
    for (int offset = 16; offset > 0; offset >>= 1) {
      combine(max, sum, __shfl_xor_sync(0xffffffffu, max, offset), __shfl_xor_sync(0xffffffffu, sum, offset));
    }
    if (lane == 0) scratch[2 * kWarps] = max + __logf(sum);
  }
  __syncthreads();
  return scratch[2 * kWarps];
}

struct Selection {
  uint32_t key;    // the top-th largest value's key
  int equal_wanted;  // how many values equal to it are among the top
};

/// The radix select of the top-th largest key, 8 bits at a time from the highest.
__device__ Selection select_top(const float* row, int64_t columns, int top, unsigned* histogram, int* shared) {
  uint32_t prefix = 0;
  uint32_t mask = 0;
  int wanted = top;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int bin = threadIdx.x; bin < 256; bin += kThreads) histogram[bin] = 0;
    __syncthreads();
    // Logits share their high bits, so most of a pass lands in a few bins: a warp adds each bin once.
    for (int64_t base = 0; base < columns; base += kThreads) {
      const int64_t column = base + threadIdx.x;
      const uint32_t key = column < columns ? key_of(__ldg(row + column)) : 0u;
      const bool counted = column < columns && (key & mask) == prefix;
      const unsigned voters = __ballot_sync(0xffffffffu, counted);
      if (!counted) continue;
      const unsigned bin = (key >> shift) & 255u;
      const unsigned peers = __match_any_sync(voters, bin);
      if ((threadIdx.x & 31) == __ffs(peers) - 1) atomicAdd(&histogram[bin], static_cast<unsigned>(__popc(peers)));
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int above = 0;
      int digit = 255;
      for (; digit > 0 && above + static_cast<int>(histogram[digit]) < wanted; --digit) above += histogram[digit];
      shared[0] = digit;
      shared[1] = wanted - above;
    }
    __syncthreads();
    prefix |= static_cast<uint32_t>(shared[0]) << shift;
    mask |= 255u << shift;
    wanted = shared[1];
    __syncthreads();
  }
  return {prefix, wanted};
}

__global__ void __launch_bounds__(kThreads) top_logprobs_kernel(const float* logits, int64_t row_stride,
                                                                 int64_t columns, int top, float* out, int64_t* ids) {
  __shared__ float scratch[2 * kWarps + 1];
  __shared__ unsigned histogram[256];
  __shared__ int shared[2 + kWarps];
  __shared__ float top_values[kMaxTopLogprobColumns];
  __shared__ int64_t top_columns[kMaxTopLogprobColumns];
  __shared__ int found;
  const int64_t row_index = blockIdx.x;
  const float* row = logits + row_index * row_stride;
  const float partition = row_partition(row, columns, scratch);
  const Selection selection = select_top(row, columns, top, histogram, shared);
  const int larger = top - selection.equal_wanted;
  if (threadIdx.x == 0) found = 0;
  __syncthreads();
  for (int64_t column = threadIdx.x; column < columns; column += kThreads) {  // the values above the cut, any order
    const float value = __ldg(row + column);
    if (key_of(value) > selection.key) {
      const int slot = atomicAdd(&found, 1);
      top_values[slot] = value;
      top_columns[slot] = column;
    }
  }
  __syncthreads();
  // The ties at the cut, the first columns first: a block-wide rank of each chunk's tied columns.
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  int taken = 0;
  for (int64_t base = 0; base < columns && taken < selection.equal_wanted; base += kThreads) {
    const int64_t column = base + threadIdx.x;
    const bool tied = column < columns && key_of(__ldg(row + column)) == selection.key;
    const unsigned ballot = __ballot_sync(0xffffffffu, tied);
    if (lane == 0) shared[2 + warp] = __popc(ballot);
    __syncthreads();
    int before = taken;
    for (int other = 0; other < warp; ++other) before += shared[2 + other];
    const int rank = before + __popc(ballot & ((1u << lane) - 1u));
    if (tied && rank < selection.equal_wanted) {
      top_values[larger + rank] = __ldg(row + column);
      top_columns[larger + rank] = column;
    }
    int chunk = 0;
    for (int other = 0; other < kWarps; ++other) chunk += shared[2 + other];
    taken += chunk;
    __syncthreads();
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  for (int i = 1; i < top; ++i) {  // insertion sort: larger value first, ties by the smaller column
    const float value = top_values[i];
    const int64_t column = top_columns[i];
    int j = i - 1;
    for (; j >= 0 && (top_values[j] < value || (top_values[j] == value && top_columns[j] > column)); --j) {
      top_values[j + 1] = top_values[j];
      top_columns[j + 1] = top_columns[j];
    }
    top_values[j + 1] = value;
    top_columns[j + 1] = column;
  }
  float* row_out = out + row_index * (1 + top);
  row_out[0] = partition;
  for (int i = 0; i < top; ++i) {
    row_out[1 + i] = top_values[i] - partition;
    ids[row_index * top + i] = top_columns[i];
  }
}

}  // namespace

void launch_top_logprobs(const float* logits, int64_t row_stride, int64_t rows, int64_t columns, int top, float* out,
                         int64_t* ids, void* stream) {
  if (rows == 0) return;
  top_logprobs_kernel<<<static_cast<unsigned>(rows), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      logits, row_stride, columns, top, out, ids);
  detail::check_launch("top_logprobs_kernel");
}

}  // namespace graphed::kernels
