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

/// Calls visit(value, column) for each column of the row a thread takes, its loads issued kBatch at a time so
/// that their latencies overlap (each pass is a chain of dependent steps otherwise). Every thread of the block
/// runs the same number of batches and calls visit for every slot, with `valid` false past the row's end, so
/// that visit may use warp votes.
constexpr int kBatch = 8;
template <typename Visit>
__device__ __forceinline__ void for_each_column(const float* row, int64_t columns, Visit visit) {
  for (int64_t base = 0; base < columns; base += int64_t{kThreads} * kBatch) {
    float values[kBatch];
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int64_t column = base + j * kThreads + threadIdx.x;
      values[j] = column < columns ? __ldg(row + column) : -INFINITY;
    }
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int64_t column = base + j * kThreads + threadIdx.x;
      visit(values[j], column, column < columns);
    }
  }
}

/// The row's log of sum exp; every thread gets it.
__device__ float row_partition(const float* row, int64_t columns, float* scratch) {
  float max = -INFINITY;
  float sum = 0.0f;
  for_each_column(row, columns, [&](float value, int64_t, bool valid) {
    if (valid) combine(max, sum, value, 1.0f);
  });
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
  uint32_t key;      // the top-th largest value's key
  int equal_wanted;  // how many values equal to it are among the top
  int equal_count;   // how many values of the row equal it
};

/// Warp 0 finds the digit whose bin holds the `wanted`-th largest key counted: lane l sums bins 255 - 8l down to
/// 248 - 8l, a scan over the lanes finds the lane where the count reaches `wanted`, and that lane walks its bins.
/// Writes the digit, the rank wanted within its bin and the bin's count to shared[0..2].
__device__ void find_digit(const unsigned* histogram, int wanted, int* shared) {
  const int lane = threadIdx.x & 31;
  int own = 0;
  for (int i = 0; i < 8; ++i) own += static_cast<int>(histogram[255 - 8 * lane - i]);
  int through = own;  // the bins of lanes 0..lane
  for (int offset = 1; offset < 32; offset <<= 1) {
    const int lower = __shfl_up_sync(0xffffffffu, through, offset);
    if (lane >= offset) through += lower;
  }
  const unsigned reached = __ballot_sync(0xffffffffu, through >= wanted);
  if (lane != __ffs(reached) - 1) return;
  int above = through - own;
  for (int i = 0; i < 8; ++i) {
    const int digit = 255 - 8 * lane - i;
    const int count = static_cast<int>(histogram[digit]);
    if (above + count >= wanted || i == 7) {
      shared[0] = digit;
      shared[1] = wanted - above;
      shared[2] = count;
      return;
    }
    above += count;
  }
}

/// The radix select of the top-th largest key, 8 bits at a time from the highest.
__device__ Selection select_top(const float* row, int64_t columns, int top, unsigned* histogram, int* shared) {
  uint32_t prefix = 0;
  uint32_t mask = 0;
  int wanted = top;
  int count = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int bin = threadIdx.x; bin < 256; bin += kThreads) histogram[bin] = 0;
    __syncthreads();
    // Logits share their high bits, so most of a pass lands in a few bins: a warp adds each bin once.
    for_each_column(row, columns, [&](float value, int64_t, bool valid) {
      const uint32_t key = key_of(value);
      const bool counted = valid && (key & mask) == prefix;
      const unsigned voters = __ballot_sync(0xffffffffu, counted);
      if (!counted) return;
      const unsigned bin = (key >> shift) & 255u;
      const unsigned peers = __match_any_sync(voters, bin);
      if ((threadIdx.x & 31) == __ffs(peers) - 1) atomicAdd(&histogram[bin], static_cast<unsigned>(__popc(peers)));
    });
    __syncthreads();
    if (threadIdx.x < 32) find_digit(histogram, wanted, shared);
    __syncthreads();
    prefix |= static_cast<uint32_t>(shared[0]) << shift;
    mask |= 255u << shift;
    wanted = shared[1];
    count = shared[2];
    __syncthreads();
  }
  return {prefix, wanted, count};
}

/// Writes the row's values above the cut (and the ties at it when all of them are among the top) to
/// values/where[0, ...) in any order, counting them in `found`.
__device__ void collect_above(const float* row, int64_t columns, const Selection& selection, float* values,
                              int64_t* where, int* found) {
  const bool every_tie = selection.equal_count == selection.equal_wanted;
  for_each_column(row, columns, [&](float value, int64_t column, bool valid) {
    const uint32_t key = key_of(value);
    if (!valid || key < selection.key || (key == selection.key && !every_tie)) return;
    const int slot = atomicAdd(found, 1);
    values[slot] = value;
    where[slot] = column;
  });
}

/// The ties at the cut when only some of them are among the top: the first columns, by a block-wide rank of each
/// chunk's tied columns, written after the `larger` values above the cut.
__device__ void collect_first_ties(const float* row, int64_t columns, const Selection& selection, int larger,
                                   float* values, int64_t* where, int* shared) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  int taken = 0;
  for (int64_t base = 0; base < columns && taken < selection.equal_wanted; base += kThreads) {
    const int64_t column = base + threadIdx.x;
    const bool tied = column < columns && key_of(__ldg(row + column)) == selection.key;
    const unsigned ballot = __ballot_sync(0xffffffffu, tied);
    if (lane == 0) shared[3 + warp] = __popc(ballot);
    __syncthreads();
    int before = taken;
    for (int other = 0; other < warp; ++other) before += shared[3 + other];
    const int rank = before + __popc(ballot & ((1u << lane) - 1u));
    if (tied && rank < selection.equal_wanted) {
      values[larger + rank] = __ldg(row + column);
      where[larger + rank] = column;
    }
    int chunk = 0;
    for (int other = 0; other < kWarps; ++other) chunk += shared[3 + other];
    taken += chunk;
    __syncthreads();
  }
}

__global__ void __launch_bounds__(kThreads)
    top_logprobs_kernel(const float* logits, int64_t row_stride, int64_t columns, int top, float* out, int64_t* ids) {
  __shared__ float scratch[2 * kWarps + 1];
  __shared__ unsigned histogram[256];
  __shared__ int shared[3 + kWarps];
  __shared__ float top_values[kMaxTopLogprobColumns];
  __shared__ int64_t top_columns[kMaxTopLogprobColumns];
  __shared__ int found;
  const int64_t row_index = blockIdx.x;
  const float* row = logits + row_index * row_stride;
  const float partition = row_partition(row, columns, scratch);
  const Selection selection = select_top(row, columns, top, histogram, shared);
  if (threadIdx.x == 0) found = 0;
  __syncthreads();
  collect_above(row, columns, selection, top_values, top_columns, &found);
  __syncthreads();
  if (selection.equal_count != selection.equal_wanted) {
    collect_first_ties(row, columns, selection, top - selection.equal_wanted, top_values, top_columns, shared);
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
