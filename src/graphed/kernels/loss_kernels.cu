// kernels/loss_kernels.cu — cross-entropy over bf16 logits with its gradient written in place
// (kernels/training_kernels.h): a block per row, one pass for the running maximum and sum of
// exponentials, one pass that writes the gradient.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "graphed/kernels/detail/block_reduce.cuh"
#include "graphed/kernels/training_kernels.h"

namespace graphed::kernels {
namespace {

using detail::block_reduce;

constexpr int kThreads = 512;

__global__ void cross_entropy_kernel(__nv_bfloat16* logits, const int64_t* labels, float* losses, int64_t vocab,
                                     float grad_scale) {
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  __nv_bfloat16* x = logits + row * vocab;
  // Each thread's running maximum and its sum of exp(x - maximum), merged over the block afterwards.
  float largest = -INFINITY, sum = 0.0f;
  for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x) {
    const float value = __bfloat162float(x[v]);
    if (value > largest) {
      sum = sum * __expf(largest - value) + 1.0f;
      largest = value;
    } else {
      sum += __expf(value - largest);
    }
  }
  const float maximum = block_reduce<true>(largest, scratch);
  const float total = block_reduce<false>(largest == -INFINITY ? 0.0f : sum * __expf(largest - maximum), scratch);
  const float log_total = logf(total);
  const int64_t label = labels[row];
  const bool valid = label >= 0 && label < vocab;
  if (threadIdx.x == 0) {
    losses[row] = valid ? maximum + log_total - __bfloat162float(x[label]) : NAN;
  }
  __syncthreads();  // the label's logit is read above before any thread overwrites it
  for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x) {
    const float probability = __expf(__bfloat162float(x[v]) - maximum - log_total);
    x[v] = __float2bfloat16_rn((probability - (v == label ? 1.0f : 0.0f)) * grad_scale);
  }
}

}  // namespace

void launch_cross_entropy(void* logits, const int64_t* labels, float* losses, int64_t rows, int64_t vocab,
                          float grad_scale, void* stream) {
  if (rows == 0) return;
  cross_entropy_kernel<<<static_cast<unsigned>(rows), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<__nv_bfloat16*>(logits), labels, losses, vocab, grad_scale);
}

}  // namespace graphed::kernels
