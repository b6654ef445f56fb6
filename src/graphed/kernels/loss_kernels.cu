// kernels/loss_kernels.cu — cross-entropy over bf16 logits with its gradient written in place
// (kernels/training_kernels.h): a block per row, one pass for the running maximum and sum of
// exponentials, one pass that writes the gradient; eight logits per 16-byte load where the rows allow.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "graphed/kernels/detail/bf16_vectors.cuh"
#include "graphed/kernels/detail/block_reduce.cuh"
#include "graphed/kernels/detail/launch_check.h"
#include "graphed/kernels/training_kernels.h"

namespace graphed::kernels {
namespace {

using detail::block_reduce;
using detail::load_eight;
using detail::store_eight;

constexpr int kThreads = 256;

/// Folds one logit into a running maximum and the sum of exp(logit - maximum).
__device__ __forceinline__ void fold(float value, float& largest, float& sum) {
  if (value > largest) {
    sum = sum * __expf(largest - value) + 1.0f;
    largest = value;
  } else {
    sum += __expf(value - largest);
  }
}

/// A block per row. kVector: 8 logits per load (the row is 16-byte aligned and a multiple of 8 long).
template <bool kVector>
__global__ void cross_entropy_kernel(__nv_bfloat16* logits, const int64_t* labels, float* losses, int64_t vocab,
                                     float grad_scale) {
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  __nv_bfloat16* x = logits + row * vocab;
  // Each thread's running maximum and its sum of exp(x - maximum), merged over the block afterwards.
  float largest = -INFINITY, sum = 0.0f;
  if (kVector) {
    for (int64_t v = threadIdx.x * 8; v < vocab; v += blockDim.x * 8) {
      float values[8];
      load_eight(x + v, values);
      float local = values[0];
#pragma unroll
      for (int i = 1; i < 8; ++i) local = fmaxf(local, values[i]);
      if (local > largest) {
        sum *= __expf(largest - local);
        largest = local;
      }
#pragma unroll
      for (int i = 0; i < 8; ++i) sum += __expf(values[i] - largest);
    }
  } else {
    for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x) fold(__bfloat162float(x[v]), largest, sum);
  }
  const float maximum = block_reduce<true>(largest, scratch);
  const float total = block_reduce<false>(largest == -INFINITY ? 0.0f : sum * __expf(largest - maximum), scratch);
  const float log_total = logf(total);
  const int64_t label = labels[row];
  const bool valid = label >= 0 && label < vocab;
  if (threadIdx.x == 0) losses[row] = valid ? maximum + log_total - __bfloat162float(x[label]) : NAN;
  __syncthreads();  // the label's logit is read above before any thread overwrites it
  const float shift = maximum + log_total;
  if (kVector) {
    for (int64_t v = threadIdx.x * 8; v < vocab; v += blockDim.x * 8) {
      float values[8];
      load_eight(x + v, values);
#pragma unroll
      for (int i = 0; i < 8; ++i) values[i] = (__expf(values[i] - shift) - (v + i == label ? 1.0f : 0.0f)) * grad_scale;
      store_eight(x + v, values);
    }
  } else {
    for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x) {
      const float probability = __expf(__bfloat162float(x[v]) - shift);
      x[v] = __float2bfloat16_rn((probability - (v == label ? 1.0f : 0.0f)) * grad_scale);
    }
  }
}

}  // namespace

void launch_cross_entropy(void* logits, const int64_t* labels, float* losses, int64_t rows, int64_t vocab,
                          float grad_scale, void* stream) {
  if (rows == 0) return;
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
  auto* x = static_cast<__nv_bfloat16*>(logits);
  if (vocab % 8 == 0 && reinterpret_cast<std::uintptr_t>(logits) % 16 == 0) {
    cross_entropy_kernel<true>
        <<<static_cast<unsigned>(rows), kThreads, 0, cuda_stream>>>(x, labels, losses, vocab, grad_scale);
  } else {
    cross_entropy_kernel<false>
        <<<static_cast<unsigned>(rows), kThreads, 0, cuda_stream>>>(x, labels, losses, vocab, grad_scale);
  }
  detail::check_launch("cross_entropy_kernel");
}

}  // namespace graphed::kernels
