// kernels/optimizer_kernels.cu — AdamW over flat fp32 buffers in one launch, writing the bf16 working
// copy of the weights in the same pass (kernels/training_kernels.h). Four elements per thread through
// 16-byte loads where the buffers allow, one at a time for the tail.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "graphed/kernels/detail/launch_check.h"
#include "graphed/kernels/training_kernels.h"

namespace graphed::kernels {
namespace {

constexpr int kThreads = 256;

struct Scalars {
  float lr, decay, beta1, beta2, one_minus_beta1, one_minus_beta2, eps, step_size, bias2_sqrt, inverse_scale;
};

__device__ __forceinline__ float update(float& parameter, float gradient, float& m, float& v, const Scalars& s) {
  gradient *= s.inverse_scale;
  parameter *= s.decay;
  m = s.beta1 * m + s.one_minus_beta1 * gradient;
  v = s.beta2 * v + s.one_minus_beta2 * gradient * gradient;
  parameter -= s.step_size * m / (sqrtf(v) / s.bias2_sqrt + s.eps);
  return parameter;
}

__global__ void adamw_kernel(float* parameters, const float* gradients, float* exp_avg, float* exp_avg_sq,
                             __nv_bfloat16* copy, int64_t n, int64_t vectors, const float* learning_rate,
                             const float* step, const float* grad_scale, AdamWHyper hyper) {
  Scalars s;
  s.lr = *learning_rate;
  s.decay = 1.0f - s.lr * hyper.weight_decay;
  s.beta1 = hyper.beta1;
  s.beta2 = hyper.beta2;
  s.one_minus_beta1 = hyper.one_minus_beta1;
  s.one_minus_beta2 = hyper.one_minus_beta2;
  s.eps = hyper.eps;
  s.step_size = s.lr / (1.0f - powf(hyper.beta1, *step));
  s.bias2_sqrt = sqrtf(1.0f - powf(hyper.beta2, *step));
  s.inverse_scale = grad_scale != nullptr ? 1.0f / *grad_scale : 1.0f;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t index = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; index < vectors; index += stride) {
    float4 p = reinterpret_cast<float4*>(parameters)[index];
    const float4 g = reinterpret_cast<const float4*>(gradients)[index];
    float4 m = reinterpret_cast<float4*>(exp_avg)[index];
    float4 v = reinterpret_cast<float4*>(exp_avg_sq)[index];
    update(p.x, g.x, m.x, v.x, s);
    update(p.y, g.y, m.y, v.y, s);
    update(p.z, g.z, m.z, v.z, s);
    update(p.w, g.w, m.w, v.w, s);
    reinterpret_cast<float4*>(parameters)[index] = p;
    reinterpret_cast<float4*>(exp_avg)[index] = m;
    reinterpret_cast<float4*>(exp_avg_sq)[index] = v;
    if (copy != nullptr) {
      __nv_bfloat162 pairs[2] = {__floats2bfloat162_rn(p.x, p.y), __floats2bfloat162_rn(p.z, p.w)};
      reinterpret_cast<uint2*>(copy)[index] = *reinterpret_cast<uint2*>(pairs);
    }
  }
  for (int64_t index = vectors * 4 + blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; index < n;
       index += stride) {
    const float p = update(parameters[index], gradients[index], exp_avg[index], exp_avg_sq[index], s);
    if (copy != nullptr) copy[index] = __float2bfloat16_rn(p);
  }
}

bool aligned(const void* pointer, std::uintptr_t bytes) {
  return reinterpret_cast<std::uintptr_t>(pointer) % bytes == 0;
}

}  // namespace

void launch_adamw(float* parameters, const float* gradients, float* exp_avg, float* exp_avg_sq, void* bf16_copy,
                  int64_t n, const float* learning_rate, const float* step, const float* grad_scale, AdamWHyper hyper,
                  void* stream) {
  if (n == 0) return;
  // The vector loop needs 16-byte fp32 buffers and an 8-byte copy; fresh allocations are 256-byte aligned.
  const bool vectorized = aligned(parameters, 16) && aligned(gradients, 16) && aligned(exp_avg, 16) &&
                          aligned(exp_avg_sq, 16) && (bf16_copy == nullptr || aligned(bf16_copy, 8));
  int64_t blocks = ((vectorized ? n / 4 : n) + kThreads - 1) / kThreads;
  blocks = blocks < 1 ? 1 : (blocks > 8192 ? 8192 : blocks);
  // Unaligned buffers take every element through the scalar loop (no vectors).
  adamw_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      parameters, gradients, exp_avg, exp_avg_sq, static_cast<__nv_bfloat16*>(bf16_copy), n, vectorized ? n / 4 : 0,
      learning_rate, step, grad_scale, hyper);
  detail::check_launch("adamw_kernel");
}

}  // namespace graphed::kernels
