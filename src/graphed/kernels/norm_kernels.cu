// kernels/norm_kernels.cu — LayerNorm and RMSNorm forward and backward (kernels/training_kernels.h).
// Forward: a warp per row, two passes over the row (statistics, then the output in bf16, or in E4M3 for an
// FP8 linear that reads it: kernels/fp8_kernels.h's launch_norm_forward_to_fp8). Backward: a fixed set of blocks
// walks the rows in a fixed order, writes each row's input gradient and keeps the weight (and bias) gradient sums
// of its rows in shared memory; the partial sums are reduced afterwards by the caller, so the result never depends
// on timing.
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "graphed/kernels/detail/bf16_vectors.cuh"
#include "graphed/kernels/detail/block_reduce.cuh"
#include "graphed/kernels/detail/launch_check.h"
#include "graphed/kernels/fp8_kernels.h"
#include "graphed/kernels/training_kernels.h"

namespace graphed::kernels {
namespace {

using detail::load;
using detail::warp_sum;

constexpr int kForwardWarps = 8;        // rows per forward block, a warp each
constexpr int kBackwardWarps = 4;       // rows in flight per backward block
constexpr int64_t kPartialRows = 1056;  // backward blocks: eight per multiprocessor of an H100 / H200
constexpr int kSumSlices = 32;          // row slices of the column-sum kernel (a warp each)
constexpr int kMaxSharedBytes = 100 * 1024;

__device__ __forceinline__ void store(float* data, int64_t i, float value) { data[i] = value; }
__device__ __forceinline__ void store(__nv_bfloat16* data, int64_t i, float value) {
  data[i] = __float2bfloat16_rn(value);
}
/// value as a T would hold it, back in fp32.
template <typename T>
__device__ __forceinline__ float rounded(float value);
template <>
__device__ __forceinline__ float rounded<float>(float value) {
  return value;
}
template <>
__device__ __forceinline__ float rounded<__nv_bfloat16>(float value) {
  return __bfloat162float(__float2bfloat16_rn(value));
}

/// Where the forward's outputs go: bf16 values ...
struct Bf16Rows {
  __nv_bfloat16* data;
  __device__ __forceinline__ void write(int64_t i, float value, float& /*amax*/) const {
    data[i] = __float2bfloat16_rn(value);
  }
  __device__ __forceinline__ void finish(float /*amax*/) const {}
};

/// ... or their E4M3 cast at a delayed scale: each value rounded to bf16 first, so the bytes (and the amax,
/// raised per warp into *amax where that is not null) equal the bf16 output's cast (kernels/fp8_kernels.h).
struct Fp8Rows {
  __nv_fp8_storage_t* data;
  const float* scale;
  float* amax;
  __device__ __forceinline__ void write(int64_t i, float value, float& row_amax) const {
    const float rounded = __bfloat162float(__float2bfloat16_rn(value));
    row_amax = fmaxf(row_amax, fabsf(rounded));
    data[i] = __nv_cvt_float_to_fp8(rounded * *scale, __NV_SATFINITE, __NV_E4M3);
  }
  __device__ __forceinline__ void finish(float row_amax) const {
    const float warp = detail::warp_max(row_amax);
    if (amax != nullptr && (threadIdx.x & 31) == 0) atomicMax(reinterpret_cast<int*>(amax), __float_as_int(warp));
  }
};

/// A warp per row: the mean (LayerNorm), the variance, then the output, each a pass over the row (the
/// later passes hit the cache; keeping the row in registers measured slower, its occupancy lower).
template <typename T, typename Rows>
__global__ void norm_forward_kernel(const T* input, const float* weight, const float* bias, Rows output,
                                    float* mean_out, float* rstd_out, int64_t rows, int columns, float epsilon) {
  const int lane = threadIdx.x & 31;
  const int64_t row = blockIdx.x * static_cast<int64_t>(kForwardWarps) + (threadIdx.x >> 5);
  if (row >= rows) return;
  const T* x = input + row * columns;
  const bool layer_norm = mean_out != nullptr;
  float mean = 0.0f;
  if (layer_norm) {
    float sum = 0.0f;
    for (int c = lane; c < columns; c += 32) sum += load(x, c);
    mean = warp_sum(sum) / static_cast<float>(columns);
  }
  float squares = 0.0f;
  for (int c = lane; c < columns; c += 32) {
    const float centered = load(x, c) - mean;
    squares += centered * centered;
  }
  const float rstd = rsqrtf(warp_sum(squares) / static_cast<float>(columns) + epsilon);
  float amax = 0.0f;
  for (int c = lane; c < columns; c += 32) {
    const float normalized = (load(x, c) - mean) * rstd * weight[c];
    output.write(row * columns + c, bias != nullptr ? normalized + bias[c] : normalized, amax);
  }
  output.finish(amax);
  if (lane == 0) {
    rstd_out[row] = rstd;
    if (layer_norm) mean_out[row] = mean;
  }
}

template <typename Rows>
void launch_forward(const void* input, Element input_type, const float* weight, const float* bias, Rows output,
                    float* mean, float* rstd, int64_t rows, int64_t columns, float epsilon, void* stream) {
  if (rows == 0) return;
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
  const auto blocks = static_cast<unsigned>((rows + kForwardWarps - 1) / kForwardWarps);
  const auto width = static_cast<int>(columns);
  if (input_type == Element::kFloat32) {
    norm_forward_kernel<<<blocks, kForwardWarps * 32, 0, cuda_stream>>>(static_cast<const float*>(input), weight, bias,
                                                                        output, mean, rstd, rows, width, epsilon);
  } else {
    norm_forward_kernel<<<blocks, kForwardWarps * 32, 0, cuda_stream>>>(
        static_cast<const __nv_bfloat16*>(input), weight, bias, output, mean, rstd, rows, width, epsilon);
  }
  detail::check_launch("norm_forward_kernel");
}

/// dx = rstd (dy w - mean(dy w) - xhat mean(dy w xhat)) for LayerNorm (RMSNorm: without the mean(dy w)
/// term, xhat = x rstd), plus residual[row] where residual is not null (rounded as autograd's separate add
/// would: the sum is never contracted into an FMA). Warp w of block b takes rows b * kBackwardWarps + w, then every
/// gridDim.x * kBackwardWarps-th; it keeps the weight (and bias) gradient sums of its rows in its own
/// shared slice (lane l owns columns l, l + 32, ...), and the block adds its warps' slices in order.
template <typename T>
__global__ void norm_backward_kernel(const __nv_bfloat16* grad_output, const T* input, const float* weight,
                                     const float* mean_in, const float* rstd_in, const T* residual, T* grad_input,
                                     float* weight_partials, float* bias_partials, int64_t rows, int columns) {
  extern __shared__ float sums[];  // [kBackwardWarps][columns] weight sums, then as many bias sums
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const bool layer_norm = mean_in != nullptr;
  const bool with_bias = bias_partials != nullptr;
  float* weight_sums = sums + warp * columns;
  float* bias_sums = sums + (kBackwardWarps + warp) * columns;
  for (int c = lane; c < columns; c += 32) {
    weight_sums[c] = 0.0f;
    if (with_bias) bias_sums[c] = 0.0f;
  }
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kBackwardWarps;
  for (int64_t row = blockIdx.x * static_cast<int64_t>(kBackwardWarps) + warp; row < rows; row += stride) {
    const __nv_bfloat16* dy = grad_output + row * columns;
    const T* x = input + row * columns;
    const float mean = layer_norm ? mean_in[row] : 0.0f;
    const float rstd = rstd_in[row];
    float dot = 0.0f, total = 0.0f;
    for (int c = lane; c < columns; c += 32) {
      const float gradient = __bfloat162float(dy[c]);
      const float normalized = (load(x, c) - mean) * rstd;
      dot += gradient * weight[c] * normalized;
      total += gradient * weight[c];
      weight_sums[c] += gradient * normalized;
      if (with_bias) bias_sums[c] += gradient;
    }
    const float mean_dot = warp_sum(dot) / static_cast<float>(columns);
    const float mean_total = layer_norm ? warp_sum(total) / static_cast<float>(columns) : 0.0f;
    T* dx = grad_input + row * columns;
    const T* residual_row = residual != nullptr ? residual + row * columns : nullptr;
    for (int c = lane; c < columns; c += 32) {
      const float normalized = (load(x, c) - mean) * rstd;
      const float own = rstd * (__bfloat162float(dy[c]) * weight[c] - mean_total - normalized * mean_dot);
      if (residual_row == nullptr) {
        store(dx, c, own);
      } else {
        store(dx, c, __fadd_rn(rounded<T>(own), load(residual_row, c)));
      }
    }
  }
  __syncthreads();
  for (int c = threadIdx.x; c < columns; c += blockDim.x) {
    float weight_total = 0.0f, bias_total = 0.0f;
    for (int w = 0; w < kBackwardWarps; ++w) {
      weight_total += sums[w * columns + c];
      if (with_bias) bias_total += sums[(kBackwardWarps + w) * columns + c];
    }
    weight_partials[blockIdx.x * static_cast<int64_t>(columns) + c] = weight_total;
    if (with_bias) bias_partials[blockIdx.x * static_cast<int64_t>(columns) + c] = bias_total;
  }
}

/// output[c] = the sum over p of partials[p, c], in a fixed order: 32 columns per block, kSumSlices
/// slices of the rows per column, the slices added in order. blockIdx.y picks the first or the second
/// (partials, output) pair.
__global__ void column_sums_kernel(const float* first_partials, float* first_output, const float* second_partials,
                                   float* second_output, int64_t partial_rows, int columns, bool accumulate) {
  __shared__ float slices[kSumSlices][32];
  const float* partials = blockIdx.y == 0 ? first_partials : second_partials;
  float* output = blockIdx.y == 0 ? first_output : second_output;
  const int column = blockIdx.x * 32 + (threadIdx.x & 31);
  const int slice = threadIdx.x >> 5;
  float sum = 0.0f;
  if (column < columns) {
    for (int64_t p = slice; p < partial_rows; p += kSumSlices) sum += partials[p * columns + column];
  }
  slices[slice][threadIdx.x & 31] = sum;
  __syncthreads();
  if (slice == 0 && column < columns) {
    float total = 0.0f;
    for (int s = 0; s < kSumSlices; ++s) total += slices[s][threadIdx.x & 31];
    output[column] = accumulate ? output[column] + total : total;
  }
}

std::size_t backward_shared_bytes(int64_t columns, bool with_bias) {
  return static_cast<std::size_t>(columns) * sizeof(float) * kBackwardWarps * (with_bias ? 2 : 1);
}

template <typename T>
void launch_backward(const __nv_bfloat16* dy, const T* x, const float* weight, const float* mean, const float* rstd,
                     const T* residual, T* dx, float* weight_partials, float* bias_partials, int64_t rows,
                     int64_t columns, cudaStream_t stream) {
  const std::size_t shared = backward_shared_bytes(columns, bias_partials != nullptr);
  if (shared > 48 * 1024) {  // beyond the default: opt in (idempotent, cheap)
    detail::check_launch(
        cudaFuncSetAttribute(norm_backward_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, kMaxSharedBytes),
        "norm_backward_kernel (its shared memory opt-in)");
  }
  const auto blocks = static_cast<unsigned>(norm_partial_rows(rows));
  norm_backward_kernel<T><<<blocks, kBackwardWarps * 32, shared, stream>>>(
      dy, x, weight, mean, rstd, residual, dx, weight_partials, bias_partials, rows, static_cast<int>(columns));
  detail::check_launch("norm_backward_kernel");
}

}  // namespace

bool norm_backward_fits(int64_t columns, bool with_bias) {
  return columns > 0 && backward_shared_bytes(columns, with_bias) <= static_cast<std::size_t>(kMaxSharedBytes);
}

int64_t norm_partial_rows(int64_t rows) {
  const int64_t needed = (rows + kBackwardWarps - 1) / kBackwardWarps;
  return needed < kPartialRows ? needed : kPartialRows;
}

void launch_norm_forward(const void* input, Element input_type, const float* weight, const float* bias, void* output,
                         float* mean, float* rstd, int64_t rows, int64_t columns, float epsilon, void* stream) {
  launch_forward(input, input_type, weight, bias, Bf16Rows{static_cast<__nv_bfloat16*>(output)}, mean, rstd, rows,
                 columns, epsilon, stream);
}

void launch_norm_forward_to_fp8(const void* input, Element input_type, const float* weight, const float* bias,
                                const float* scale, void* output, float* amax, float* mean, float* rstd, int64_t rows,
                                int64_t columns, float epsilon, void* stream) {
  launch_forward(input, input_type, weight, bias, Fp8Rows{static_cast<__nv_fp8_storage_t*>(output), scale, amax}, mean,
                 rstd, rows, columns, epsilon, stream);
}

void launch_norm_backward(const void* grad_output, const void* input, Element input_type, const float* weight,
                          const float* mean, const float* rstd, const void* residual_gradient, void* grad_input,
                          float* weight_partials, float* bias_partials, int64_t rows, int64_t columns, void* stream) {
  if (rows == 0) return;
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
  const auto* dy = static_cast<const __nv_bfloat16*>(grad_output);
  if (input_type == Element::kFloat32) {
    launch_backward(dy, static_cast<const float*>(input), weight, mean, rstd,
                    static_cast<const float*>(residual_gradient), static_cast<float*>(grad_input), weight_partials,
                    bias_partials, rows, columns, cuda_stream);
  } else {
    launch_backward(dy, static_cast<const __nv_bfloat16*>(input), weight, mean, rstd,
                    static_cast<const __nv_bfloat16*>(residual_gradient), static_cast<__nv_bfloat16*>(grad_input),
                    weight_partials, bias_partials, rows, columns, cuda_stream);
  }
}

void launch_column_sums(const float* partials, float* output, const float* second_partials, float* second_output,
                        int64_t partial_rows, int64_t columns, bool accumulate, void* stream) {
  if (columns == 0) return;
  const dim3 blocks(static_cast<unsigned>((columns + 31) / 32), second_partials != nullptr ? 2 : 1);
  column_sums_kernel<<<blocks, kSumSlices * 32, 0, static_cast<cudaStream_t>(stream)>>>(
      partials, output, second_partials, second_output, partial_rows, static_cast<int>(columns), accumulate);
  detail::check_launch("column_sums_kernel");
}

}  // namespace graphed::kernels
