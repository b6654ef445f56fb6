// kernels/norm_kernels.cu — LayerNorm and RMSNorm forward and backward (kernels/training_kernels.h).
// Forward: a block per row, two passes over the row (statistics, then the output in bf16). Backward: a
// fixed set of blocks walks the rows in a fixed order, writes each row's input gradient and keeps the
// weight (and bias) gradient sums of its rows in shared memory; the partial sums are reduced afterwards
// by the caller, so the result never depends on timing.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "graphed/kernels/detail/block_reduce.cuh"
#include "graphed/kernels/training_kernels.h"

namespace graphed::kernels {
namespace {

using detail::block_reduce;

constexpr int kThreads = 256;
constexpr int64_t kPartialRows = 264;  // two blocks per multiprocessor of an H100 / H200

__device__ __forceinline__ float load(const float* data, int64_t i) { return data[i]; }
__device__ __forceinline__ float load(const __nv_bfloat16* data, int64_t i) { return __bfloat162float(data[i]); }
__device__ __forceinline__ void store(float* data, int64_t i, float value) { data[i] = value; }
__device__ __forceinline__ void store(__nv_bfloat16* data, int64_t i, float value) { data[i] = __float2bfloat16_rn(value); }

template <typename T>
__global__ void norm_forward_kernel(const T* input, const float* weight, const float* bias, __nv_bfloat16* output,
                                    float* mean_out, float* rstd_out, int columns, float epsilon) {
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const T* x = input + row * columns;
  __nv_bfloat16* y = output + row * columns;
  const bool layer_norm = mean_out != nullptr;
  float mean = 0.0f;
  if (layer_norm) {
    float sum = 0.0f;
    for (int c = threadIdx.x; c < columns; c += blockDim.x) sum += load(x, c);
    mean = block_reduce<false>(sum, scratch) / static_cast<float>(columns);
  }
  float squares = 0.0f;
  for (int c = threadIdx.x; c < columns; c += blockDim.x) {
    const float centered = load(x, c) - mean;
    squares += centered * centered;
  }
  const float rstd = rsqrtf(block_reduce<false>(squares, scratch) / static_cast<float>(columns) + epsilon);
  for (int c = threadIdx.x; c < columns; c += blockDim.x) {
    const float normalized = (load(x, c) - mean) * rstd * weight[c];
    store(y, c, bias != nullptr ? normalized + bias[c] : normalized);
  }
  if (threadIdx.x == 0) {
    rstd_out[row] = rstd;
    if (layer_norm) mean_out[row] = mean;
  }
}

/// dx = rstd (dy w - mean(dy w) - xhat mean(dy w xhat)) for LayerNorm (RMSNorm: without the
/// mean(dy w) term and with xhat = x rstd). Block b takes rows b, b + gridDim.x, ...
template <typename T>
__global__ void norm_backward_kernel(const __nv_bfloat16* grad_output, const T* input, const float* weight,
                                     const float* mean_in, const float* rstd_in, T* grad_input, float* weight_partials,
                                     float* bias_partials, int64_t rows, int columns) {
  extern __shared__ float sums[];  // [columns] weight sums, then [columns] bias sums
  __shared__ float scratch[32];
  const bool layer_norm = mean_in != nullptr;
  float* weight_sums = sums;
  float* bias_sums = sums + columns;
  for (int c = threadIdx.x; c < columns; c += blockDim.x) {
    weight_sums[c] = 0.0f;
    if (bias_partials != nullptr) bias_sums[c] = 0.0f;
  }
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const __nv_bfloat16* dy = grad_output + row * columns;
    const T* x = input + row * columns;
    const float mean = layer_norm ? mean_in[row] : 0.0f;
    const float rstd = rstd_in[row];
    float dot = 0.0f, total = 0.0f;
    for (int c = threadIdx.x; c < columns; c += blockDim.x) {
      const float scaled = __bfloat162float(dy[c]) * weight[c];
      const float normalized = (load(x, c) - mean) * rstd;
      dot += scaled * normalized;
      total += scaled;
      // Each column belongs to one thread: no race on the shared sums.
      weight_sums[c] += __bfloat162float(dy[c]) * normalized;
      if (bias_partials != nullptr) bias_sums[c] += __bfloat162float(dy[c]);
    }
    const float mean_dot = block_reduce<false>(dot, scratch) / static_cast<float>(columns);
    const float mean_total = layer_norm ? block_reduce<false>(total, scratch) / static_cast<float>(columns) : 0.0f;
    T* dx = grad_input + row * columns;
    for (int c = threadIdx.x; c < columns; c += blockDim.x) {
      const float scaled = __bfloat162float(dy[c]) * weight[c];
      const float normalized = (load(x, c) - mean) * rstd;
      store(dx, c, rstd * (scaled - mean_total - normalized * mean_dot));
    }
  }
  for (int c = threadIdx.x; c < columns; c += blockDim.x) {
    weight_partials[blockIdx.x * static_cast<int64_t>(columns) + c] = weight_sums[c];
    if (bias_partials != nullptr) bias_partials[blockIdx.x * static_cast<int64_t>(columns) + c] = bias_sums[c];
  }
}

}  // namespace

bool norm_backward_fits(int64_t columns, bool with_bias) {
  constexpr int64_t kSharedBytes = 48 * 1024 - 32 * sizeof(float);
  return columns > 0 && columns * static_cast<int64_t>(sizeof(float)) * (with_bias ? 2 : 1) <= kSharedBytes;
}

int64_t norm_partial_rows(int64_t rows) { return rows < kPartialRows ? rows : kPartialRows; }

void launch_norm_forward(const void* input, Element input_type, const float* weight, const float* bias, void* output,
                         float* mean, float* rstd, int64_t rows, int64_t columns, float epsilon, void* stream) {
  if (rows == 0) return;
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
  const auto blocks = static_cast<unsigned>(rows);
  auto* y = static_cast<__nv_bfloat16*>(output);
  if (input_type == Element::kFloat32) {
    norm_forward_kernel<<<blocks, kThreads, 0, cuda_stream>>>(static_cast<const float*>(input), weight, bias, y, mean,
                                                              rstd, static_cast<int>(columns), epsilon);
  } else {
    norm_forward_kernel<<<blocks, kThreads, 0, cuda_stream>>>(static_cast<const __nv_bfloat16*>(input), weight, bias,
                                                              y, mean, rstd, static_cast<int>(columns), epsilon);
  }
}

void launch_norm_backward(const void* grad_output, const void* input, Element input_type, const float* weight,
                          const float* mean, const float* rstd, void* grad_input, float* weight_partials,
                          float* bias_partials, int64_t rows, int64_t columns, void* stream) {
  if (rows == 0) return;
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
  const auto blocks = static_cast<unsigned>(norm_partial_rows(rows));
  const std::size_t shared = static_cast<std::size_t>(columns) * sizeof(float) * (bias_partials != nullptr ? 2 : 1);
  const auto* dy = static_cast<const __nv_bfloat16*>(grad_output);
  if (input_type == Element::kFloat32) {
    norm_backward_kernel<<<blocks, kThreads, shared, cuda_stream>>>(
        dy, static_cast<const float*>(input), weight, mean, rstd, static_cast<float*>(grad_input), weight_partials,
        bias_partials, rows, static_cast<int>(columns));
  } else {
    norm_backward_kernel<<<blocks, kThreads, shared, cuda_stream>>>(
        dy, static_cast<const __nv_bfloat16*>(input), weight, mean, rstd, static_cast<__nv_bfloat16*>(grad_input),
        weight_partials, bias_partials, rows, static_cast<int>(columns));
  }
}

}  // namespace graphed::kernels
