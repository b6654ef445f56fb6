// kernels/row_linear.cu — see kernels/row_linear.h. As many blocks as fit on the GPU at once (two a
// multiprocessor; fewer for small layers); each warp owns output features warp, warp + warps in grid, ...
// and streams their weight rows through registers, eight 16-byte vectors per lane at a time with the next
// eight already in flight (8-byte vectors of FP8 weights, three blocks a multiprocessor, each row scaled at the end).
// Each block stages the transformed input rows in shared memory once. Launched as a programmatic dependent launch: the
// first weights load while the kernel before is still running.
#include "graphed/kernels/row_linear.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <type_traits>

#include "graphed/kernels/detail/bf16_vectors.cuh"
#include "graphed/kernels/detail/block_reduce.cuh"
#include "graphed/kernels/detail/launch_check.h"
#include "graphed/kernels/detail/programmatic_launch.cuh"

namespace graphed::kernels {
namespace {

using detail::load_eight;
using detail::store_eight;
using detail::warp_sum;

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int64_t kMaxStagedBytes = 48 * 1024;  // rows x in bf16 values in shared memory: the default limit

struct Parameters {
  const __nv_bfloat16* input;
  const __nv_bfloat16* norm_weight;
  float epsilon;
  const uint4* weight;
  const float* weight_scale;  // FP8 weights only
  const __nv_bfloat16* bias;
  const __nv_bfloat16* residual;
  __nv_bfloat16* output;
  int rows, in_features, out_features;
};

constexpr int kInFlight = 4;  // 16-byte loads a thread issues before it uses the first, while staging

__device__ __forceinline__ uint4 load_vector(const __nv_bfloat16* source) {
  return *reinterpret_cast<const uint4*>(source);
}

/// scales[r] = rsqrt(mean(input[r]^2) + epsilon): warp r sums row r, kInFlight vectors a lane at a time.
__device__ void find_norm_scales(const Parameters& p, float* scales) {
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const int vectors = p.in_features / 8;
  if (warp >= p.rows) return;
  const __nv_bfloat16* row = p.input + static_cast<int64_t>(warp) * p.in_features;
  float squares = 0.0f;
  for (int base = lane; base < vectors; base += kInFlight * 32) {
    uint4 raw[kInFlight];
#pragma unroll
    for (int c = 0; c < kInFlight; ++c) {
      if (base + c * 32 < vectors) raw[c] = load_vector(row + (base + c * 32) * 8);
    }
#pragma unroll
    for (int c = 0; c < kInFlight; ++c) {
      if (base + c * 32 >= vectors) break;
      float x[8];
      load_eight(reinterpret_cast<const __nv_bfloat16*>(&raw[c]), x);
#pragma unroll
      for (int e = 0; e < 8; ++e) squares += x[e] * x[e];
    }
  }
  squares = warp_sum(squares);
  if (lane == 0) scales[warp] = rsqrtf(squares / static_cast<float>(p.in_features) + p.epsilon);
}

/// staged [rows, in] = transform(input): the whole block, kStaging vectors a thread at a time (held as raw
/// 16-byte words: the first weights are live in registers meanwhile), ending with a barrier.
template <int kStaging, RowTransform kTransform>
__device__ void stage_input(const Parameters& p, __nv_bfloat16* staged) {
  __shared__ float scales[kRowLinearMaxRows];
  if (kTransform == RowTransform::kRmsNorm) {
    find_norm_scales(p, scales);
    __syncthreads();
  }
  const int in = p.in_features;
  const int vectors = in / 8;
  const int total = p.rows * vectors;
  for (int base = threadIdx.x; base < total; base += kStaging * kThreads) {
    uint4 first[kStaging], second[kStaging];  // x, and the norm weight or SwiGLU's up half
#pragma unroll
    for (int c = 0; c < kStaging; ++c) {
      const int index = base + c * kThreads;
      if (index >= total) break;
      const int64_t row = index / vectors;
      const int column = (index % vectors) * 8;
      const int64_t width = kTransform == RowTransform::kSwiglu ? 2 * in : in;
      first[c] = load_vector(p.input + row * width + column);
      if (kTransform == RowTransform::kSwiglu) second[c] = load_vector(p.input + row * width + in + column);
      if (kTransform == RowTransform::kRmsNorm) second[c] = load_vector(p.norm_weight + column);
    }
#pragma unroll
    for (int c = 0; c < kStaging; ++c) {
      const int index = base + c * kThreads;
      if (index >= total) break;
      const int row = index / vectors;
      const int column = (index % vectors) * 8;
      float x[8], y[8];
      load_eight(reinterpret_cast<const __nv_bfloat16*>(&first[c]), x);
      if (kTransform != RowTransform::kNone) load_eight(reinterpret_cast<const __nv_bfloat16*>(&second[c]), y);
      if (kTransform == RowTransform::kSwiglu) {
#pragma unroll
        for (int e = 0; e < 8; ++e) x[e] = x[e] / (1.0f + __expf(-x[e])) * y[e];
      }
      if (kTransform == RowTransform::kRmsNorm) {
#pragma unroll
        for (int e = 0; e < 8; ++e) x[e] = x[e] * scales[row] * y[e];
      }
      store_eight(staged + static_cast<int64_t>(row) * in + column, x);
    }
  }
  __syncthreads();
}

/// How a weight row lies in vectors of eight values: 16 bytes of bf16, or 8 bytes of FP8 (so a lane's staged
/// input is read the same way for both, one 16-byte shared load a vector). A lane holds kGroup vectors per step,
/// so a warp's step covers 2,048 columns either way.
template <bool kFp8>
struct WeightLayout {
  using Vector = typename std::conditional<kFp8, uint2, uint4>::type;
  static constexpr int kValues = 8;  // values a vector
  static constexpr int kGroup = 8;   // vectors a lane holds per step
  static constexpr int kVectorsPerStep = 32 * kGroup;
  static constexpr int kBlocksPerMultiprocessor = kFp8 ? 3 : 2;  // FP8: half the bytes in flight a warp, more warps
};

/// Loads step `step` of weight row `feature`: vectors step x kVectorsPerStep + c x 32 + lane, zero past the row.
template <bool kFp8>
__device__ __forceinline__ void load_step(const void* weight, int vectors, int feature, int step, int lane,
                                          typename WeightLayout<kFp8>::Vector (&target)[WeightLayout<kFp8>::kGroup]) {
  using Layout = WeightLayout<kFp8>;
  using Vector = typename Layout::Vector;
  const Vector* row = static_cast<const Vector*>(weight) + static_cast<int64_t>(feature) * vectors;
#pragma unroll
  for (int c = 0; c < Layout::kGroup; ++c) {
    const int v = step * Layout::kVectorsPerStep + c * 32 + lane;
    target[c] = v < vectors ? __ldg(row + v) : Vector{};
  }
}

/// The eight values of one weight vector as floats: bf16, or E4M3 (unscaled).
__device__ __forceinline__ void unpack(const uint4& vector, float (&w)[8]) {
  load_eight(reinterpret_cast<const __nv_bfloat16*>(&vector), w);
}
__device__ __forceinline__ void unpack(const uint2& vector, float (&w)[8]) {
  const auto* pairs = reinterpret_cast<const __nv_fp8x2_storage_t*>(&vector);
#pragma unroll
  for (int p = 0; p < 4; ++p) {
    const float2 values = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(pairs[p], __NV_E4M3)));
    w[2 * p] = values.x;
    w[2 * p + 1] = values.y;
  }
}

/// sums[r] += the step's weights . staged row r, in column order.
template <bool kFp8, int kRows>
__device__ __forceinline__ void accumulate(
    const typename WeightLayout<kFp8>::Vector (&weights)[WeightLayout<kFp8>::kGroup], const __nv_bfloat16* staged,
    int rows, int in, int vectors, int step, int lane, float (&sums)[kRows]) {
  using Layout = WeightLayout<kFp8>;
#pragma unroll
  for (int c = 0; c < Layout::kGroup; ++c) {
    const int v = step * Layout::kVectorsPerStep + c * 32 + lane;
    if (v >= vectors) continue;
    float w[8];
    unpack(weights[c], w);
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      if (r >= rows) break;
      float x[8];
      load_eight(staged + static_cast<int64_t>(r) * in + v * 8, x);
#pragma unroll
      for (int e = 0; e < 8; ++e) sums[r] += w[e] * x[e];
    }
  }
}

/// Reduces the warp's sums of one feature and writes each row's output (lane r writes row r); FP8 weights'
/// sums are multiplied by the row's scale first.
template <int kRows>
__device__ __forceinline__ void write_feature(const Parameters& p, int feature, int lane, float (&sums)[kRows]) {
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    if (r >= p.rows) break;
    float total = warp_sum(sums[r]);
    sums[r] = 0.0f;
    if (lane != r) continue;
    if (p.weight_scale != nullptr) total *= p.weight_scale[feature];
    const float biased = total + (p.bias != nullptr ? __bfloat162float(p.bias[feature]) : 0.0f);
    const int64_t at = static_cast<int64_t>(r) * p.out_features + feature;
    __nv_bfloat16 value = __float2bfloat16(biased);
    if (p.residual != nullptr) value = __float2bfloat16(__bfloat162float(value) + __bfloat162float(p.residual[at]));
    p.output[at] = value;
  }
}

template <bool kFp8, int kRows, RowTransform kTransform>
__global__ void __launch_bounds__(kThreads, WeightLayout<kFp8>::kBlocksPerMultiprocessor)
    row_linear_kernel(Parameters p) {
  using Layout = WeightLayout<kFp8>;
  extern __shared__ uint4 shared_vectors[];
  __nv_bfloat16* staged = reinterpret_cast<__nv_bfloat16*>(shared_vectors);
  const int lane = threadIdx.x & 31;
  const int first_feature = blockIdx.x * kWarps + (threadIdx.x >> 5);
  const int warp_count = gridDim.x * kWarps;
  const int vectors = p.in_features / Layout::kValues;  // of the weight row; eight values each
  const int steps = (vectors + Layout::kVectorsPerStep - 1) / Layout::kVectorsPerStep;
  const int features =
      p.out_features > first_feature ? (p.out_features - first_feature + warp_count - 1) / warp_count : 0;
  const int items = features * steps;  // (feature, step) pairs of this warp, feature-major

  typename Layout::Vector current[Layout::kGroup];
  if (items > 0) load_step<kFp8>(p.weight, vectors, first_feature, 0, lane, current);  // reads no earlier output
  detail::wait_for_previous_kernel();
  // Fewer vectors in flight where both SwiGLU halves are live: no spills.
  stage_input<kTransform == RowTransform::kSwiglu ? 2 : kInFlight, kTransform>(p, staged);
  detail::let_next_kernel_start();

  float sums[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) sums[r] = 0.0f;
  for (int item = 0; item < items; ++item) {  // the next item's weights load while this one's are summed
    typename Layout::Vector next[Layout::kGroup];
    if (item + 1 < items) {
      load_step<kFp8>(p.weight, vectors, first_feature + ((item + 1) / steps) * warp_count, (item + 1) % steps, lane,
                      next);
    }
    const int step = item % steps;
    accumulate<kFp8, kRows>(current, staged, p.rows, p.in_features, vectors, step, lane, sums);
    if (step == steps - 1) write_feature<kRows>(p, first_feature + (item / steps) * warp_count, lane, sums);
#pragma unroll
    for (int c = 0; c < Layout::kGroup; ++c) current[c] = next[c];
  }
}

/// Blocks of the kernel that fit on one multiprocessor with this much staging, asked once per size.
template <bool kFp8, int kRows, RowTransform kTransform>
int resident_blocks(size_t shared_bytes) {
  static std::mutex mutex;
  static std::map<size_t, int> known;
  const std::lock_guard<std::mutex> lock(mutex);
  const auto found = known.find(shared_bytes);
  if (found != known.end()) return found->second;
  int blocks = 1;
  detail::check_launch(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                           &blocks, row_linear_kernel<kFp8, kRows, kTransform>, kThreads, shared_bytes),
                       "row_linear_kernel (its occupancy query)");
  known.emplace(shared_bytes, std::max(blocks, 1));
  return std::max(blocks, 1);
}

template <bool kFp8, int kRows, RowTransform kTransform>
void launch_with(const Parameters& p, cudaStream_t stream) {
  const auto kernel = row_linear_kernel<kFp8, kRows, kTransform>;
  const auto shared = static_cast<size_t>(p.rows) * p.in_features * sizeof(__nv_bfloat16);
  const int wanted = (p.out_features + kWarps - 1) / kWarps;
  const int resident = resident_blocks<kFp8, kRows, kTransform>(shared) * detail::multiprocessor_count();
  detail::launch_programmatic("row_linear_kernel", kernel, dim3(std::max(1, std::min(wanted, resident))),
                              dim3(kThreads), shared, stream, p);
}

template <RowTransform kTransform>
void launch_rows(const Parameters& p, cudaStream_t stream) {
  if (p.weight_scale != nullptr) {
    if (p.rows <= 1) return launch_with<true, 1, kTransform>(p, stream);
    return launch_with<true, 2, kTransform>(p, stream);
  }
  if (p.rows <= 1) return launch_with<false, 1, kTransform>(p, stream);
  launch_with<false, 2, kTransform>(p, stream);
}

}  // namespace

bool row_linear_fits(int64_t rows, int64_t in_features, bool fp8_weight) {
  return rows >= 1 && rows <= kRowLinearMaxRows && in_features % (fp8_weight ? 16 : 8) == 0 && in_features > 0 &&
         rows * in_features * static_cast<int64_t>(sizeof(__nv_bfloat16)) <= kMaxStagedBytes;
}

void launch_row_linear(const RowLinearArguments& arguments, void* stream) {
  const Parameters p{static_cast<const __nv_bfloat16*>(arguments.input),
                     static_cast<const __nv_bfloat16*>(arguments.norm_weight),
                     arguments.epsilon,
                     static_cast<const uint4*>(arguments.weight),
                     arguments.weight_scale,
                     static_cast<const __nv_bfloat16*>(arguments.bias),
                     static_cast<const __nv_bfloat16*>(arguments.residual),
                     static_cast<__nv_bfloat16*>(arguments.output),
                     static_cast<int>(arguments.rows),
                     static_cast<int>(arguments.in_features),
                     static_cast<int>(arguments.out_features)};
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
  switch (arguments.transform) {
    case RowTransform::kNone: return launch_rows<RowTransform::kNone>(p, cuda_stream);
    case RowTransform::kRmsNorm: return launch_rows<RowTransform::kRmsNorm>(p, cuda_stream);
    case RowTransform::kSwiglu: return launch_rows<RowTransform::kSwiglu>(p, cuda_stream);
  }
}

}  // namespace graphed::kernels
