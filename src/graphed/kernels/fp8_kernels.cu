// kernels/fp8_kernels.cu — see kernels/fp8_kernels.h. Grid-stride loops of four values per step where
// the pointers and count allow (one otherwise); each block folds its amax once into the device value with
// an integer atomic max, which orders non-negative floats as their bits do.
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "graphed/kernels/detail/bf16_vectors.cuh"
#include "graphed/kernels/detail/block_reduce.cuh"
#include "graphed/kernels/detail/launch_check.h"
#include "graphed/kernels/detail/swiglu.cuh"
#include "graphed/kernels/fp8_kernels.h"

namespace graphed::kernels {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(int64_t work) {
  const int64_t blocks = (work + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 1024 ? (blocks > 0 ? blocks : 1) : 1024);
}

__device__ __forceinline__ void fold_amax(float local, float* amax) {
  __shared__ float scratch[32];
  const float block = detail::block_reduce<true>(local, scratch);
  if (threadIdx.x == 0) atomicMax(reinterpret_cast<int*>(amax), __float_as_int(block));
}

__device__ __forceinline__ __nv_fp8_storage_t cast_one(float value, bool e5m2) {
  return __nv_cvt_float_to_fp8(value, __NV_SATFINITE, e5m2 ? __NV_E5M2 : __NV_E4M3);
}

/// kVector values per step: 4 (aligned pointers, count a multiple of 4) or 1. kCast: write the FP8 values.
template <typename T, int kVector, bool kCast>
__global__ void fp8_kernel(const T* input, int64_t count, const float* scale, __nv_fp8_storage_t* output, bool e5m2,
                           float* amax) {
  const float factor = kCast ? *scale : 1.0f;
  float local = 0.0f;
  const int64_t steps = count / kVector;
  for (int64_t step = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; step < steps;
       step += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float values[kVector];
    const int64_t first = step * kVector;
#pragma unroll
    for (int v = 0; v < kVector; ++v) values[v] = detail::load(input, first + v);
#pragma unroll
    for (int v = 0; v < kVector; ++v) local = fmaxf(local, fabsf(values[v]));
    if (kCast) {
      if (kVector == 4) {
        uint32_t packed = 0;
#pragma unroll
        for (int v = 0; v < 4; ++v) packed |= static_cast<uint32_t>(cast_one(values[v] * factor, e5m2)) << (8 * v);
        *reinterpret_cast<uint32_t*>(output + first) = packed;
      } else {
        output[first] = cast_one(values[0] * factor, e5m2);
      }
    }
  }
  if (amax != nullptr) fold_amax(local, amax);
}

template <typename T, bool kCast>
void launch(const void* input, int64_t count, const float* scale, void* output, bool e5m2, float* amax, void* stream) {
  const auto* typed = static_cast<const T*>(input);
  auto* bytes = static_cast<__nv_fp8_storage_t*>(output);
  const bool aligned = reinterpret_cast<uintptr_t>(input) % (4 * sizeof(T)) == 0 &&
                       (!kCast || reinterpret_cast<uintptr_t>(output) % 4 == 0);
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
  if (aligned && count % 4 == 0) {
    fp8_kernel<T, 4, kCast>
        <<<blocks_for(count / 4), kThreads, 0, cuda_stream>>>(typed, count, scale, bytes, e5m2, amax);
  } else {
    fp8_kernel<T, 1, kCast><<<blocks_for(count), kThreads, 0, cuda_stream>>>(typed, count, scale, bytes, e5m2, amax);
  }
  detail::check_launch("fp8_kernel");
}

constexpr int kTile = 64;  // cast-transpose tiles: 64 x 64 values, a row of 16 four-byte words each

/// The values a cast reads, by (row, column) of the matrix it casts: the input itself ...
template <typename T>
struct PlainValues {
  const T* input;
  int64_t columns;
  __device__ __forceinline__ float operator()(int64_t row, int64_t column) const {
    return detail::load(input, row * columns + column);
  }
};

/// ... or SwiGLU of a bf16 input [rows, 2 columns], rounded to bf16 as launch_swiglu_forward writes it.
struct SwigluValues {
  const __nv_bfloat16* input;
  int64_t columns;
  __device__ __forceinline__ float operator()(int64_t row, int64_t column) const {
    const __nv_bfloat16* gate = input + row * 2 * columns + column;
    const float value = detail::swiglu(__bfloat162float(gate[0]), __bfloat162float(gate[columns]));
    return __bfloat162float(__float2bfloat16_rn(value));
  }
};

/// Writes a tile of bytes (rows of four-byte words) into the transpose: four bytes of a column at a time,
/// gathered into one word of a row of the transpose.
__device__ __forceinline__ void write_transposed_tile(const uint32_t (&tile)[kTile][kTile / 4 + 1], int64_t first_row,
                                                      int64_t first_column, int64_t rows, int64_t columns,
                                                      __nv_fp8_storage_t* transposed) {
  for (int item = threadIdx.x; item < kTile * kTile / 4; item += kThreads) {
    const int c = item / (kTile / 4);  // the tile's column: a row of the transpose
    const int word = item % (kTile / 4);
    const int64_t column = first_column + c;
    const int64_t row = first_row + 4 * word;
    if (column >= columns || row >= rows) continue;
    uint32_t packed = 0;
#pragma unroll
    for (int v = 0; v < 4; ++v) packed |= ((tile[4 * word + v][c / 4] >> (8 * (c % 4))) & 0xffu) << (8 * v);
    *reinterpret_cast<uint32_t*>(transposed + column * rows + row) = packed;
  }
}

/// One tile of the cast and its transpose: each thread casts four neighbours of a row at a time and writes
/// them as one word (rows of the cast), keeping the tile's bytes in shared memory; then gathers four bytes
/// of a column at a time into one word of the transpose (none where transposed is null).
template <typename Values>
__global__ void cast_transpose_kernel(Values values, int64_t rows, int64_t columns, const float* scale,
                                      __nv_fp8_storage_t* output, __nv_fp8_storage_t* transposed, bool e5m2,
                                      float* amax) {
  __shared__ uint32_t tile[kTile][kTile / 4 + 1];  // + 1: the column reads fall in different banks
  const int64_t first_row = static_cast<int64_t>(blockIdx.y) * kTile;
  const int64_t first_column = static_cast<int64_t>(blockIdx.x) * kTile;
  const float factor = *scale;
  float local = 0.0f;
  for (int item = threadIdx.x; item < kTile * kTile / 4; item += kThreads) {
    const int r = item / (kTile / 4);
    const int word = item % (kTile / 4);
    const int64_t row = first_row + r;
    const int64_t column = first_column + 4 * word;
    uint32_t packed = 0;
    if (row < rows && column < columns) {
#pragma unroll
      for (int v = 0; v < 4; ++v) {
        const float value = values(row, column + v);
        local = fmaxf(local, fabsf(value));
        packed |= static_cast<uint32_t>(cast_one(value * factor, e5m2)) << (8 * v);
      }
      *reinterpret_cast<uint32_t*>(output + row * columns + column) = packed;
    }
    tile[r][word] = packed;
  }
  if (transposed != nullptr) {
    __syncthreads();
    write_transposed_tile(tile, first_row, first_column, rows, columns, transposed);
  }
  if (amax != nullptr) fold_amax(local, amax);
}

/// The transpose of a byte matrix, a tile at a time.
__global__ void transpose_kernel(const __nv_fp8_storage_t* input, int64_t rows, int64_t columns,
                                 __nv_fp8_storage_t* transposed) {
  __shared__ uint32_t tile[kTile][kTile / 4 + 1];
  const int64_t first_row = static_cast<int64_t>(blockIdx.y) * kTile;
  const int64_t first_column = static_cast<int64_t>(blockIdx.x) * kTile;
  for (int item = threadIdx.x; item < kTile * kTile / 4; item += kThreads) {
    const int r = item / (kTile / 4);
    const int word = item % (kTile / 4);
    const int64_t row = first_row + r;
    const int64_t column = first_column + 4 * word;
    tile[r][word] =
        row < rows && column < columns ? *reinterpret_cast<const uint32_t*>(input + row * columns + column) : 0u;
  }
  __syncthreads();
  write_transposed_tile(tile, first_row, first_column, rows, columns, transposed);
}

/// Raises *amax to the largest |value| of a rows x columns matrix of values (a grid-stride loop).
template <typename Values>
__global__ void values_amax_kernel(Values values, int64_t rows, int64_t columns, float* amax) {
  float local = 0.0f;
  for (int64_t index = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; index < rows * columns;
       index += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    local = fmaxf(local, fabsf(values(index / columns, index % columns)));
  }
  fold_amax(local, amax);
}

dim3 tiles_of(int64_t rows, int64_t columns) {
  return dim3(static_cast<unsigned>((columns + kTile - 1) / kTile), static_cast<unsigned>((rows + kTile - 1) / kTile));
}

/// Row blockIdx.x of input [rows, columns] in E4M3 at its own scale, largest / the row's amax (1 for a row of
/// zeros or one that is not finite): four neighbours a thread at a time (columns a multiple of 4).
template <typename T>
__global__ void cast_rows_kernel(const T* input, int64_t columns, float largest, __nv_fp8_storage_t* output,
                                 float* scale_inverse) {
  __shared__ float scratch[32];
  const int64_t offset = static_cast<int64_t>(blockIdx.x) * columns;
  float local = 0.0f;
  for (int64_t column = 4 * threadIdx.x; column < columns; column += 4 * blockDim.x) {
#pragma unroll
    for (int v = 0; v < 4; ++v) local = fmaxf(local, fabsf(detail::load(input, offset + column + v)));
  }
  const float amax = detail::block_reduce<true>(local, scratch);
  const float scale = isfinite(amax) && amax > 0.0f ? largest / amax : 1.0f;
  for (int64_t column = 4 * threadIdx.x; column < columns; column += 4 * blockDim.x) {
    uint32_t packed = 0;
#pragma unroll
    for (int v = 0; v < 4; ++v) {
      packed |= static_cast<uint32_t>(cast_one(detail::load(input, offset + column + v) * scale, false)) << (8 * v);
    }
    *reinterpret_cast<uint32_t*>(output + offset + column) = packed;
  }
  if (threadIdx.x == 0) scale_inverse[blockIdx.x] = 1.0f / scale;
}

__global__ void scale_kernel(const float* amax, float largest, float* scale, float* scale_inverse) {
  const float value = *amax;
  float next = isfinite(value) && value > 0.0f ? largest / value : 1.0f;
  if (isinf(next)) next = 3.402823466e38f;
  *scale = next;
  *scale_inverse = 1.0f / next;
}

}  // namespace

bool fp8_kernels_built_for_current_device() {
  cudaFuncAttributes attributes;
  const bool found = cudaFuncGetAttributes(&attributes, fp8_kernel<__nv_bfloat16, 4, true>) == cudaSuccess;
  if (!found) cudaGetLastError();  // clear the error this question left behind
  return found;
}

void launch_scale_from_amax(const float* amax, float largest, float* scale, float* scale_inverse, void* stream) {
  scale_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(amax, largest, scale, scale_inverse);
  detail::check_launch("scale_kernel");
}

void launch_amax(const void* input, Element input_type, int64_t count, float* amax, void* stream) {
  if (input_type == Element::kFloat32) {
    launch<float, false>(input, count, nullptr, nullptr, false, amax, stream);
  } else {
    launch<__nv_bfloat16, false>(input, count, nullptr, nullptr, false, amax, stream);
  }
}

void launch_cast_to_fp8(const void* input, Element input_type, int64_t count, const float* scale, void* output,
                        bool e5m2, float* amax, void* stream) {
  if (input_type == Element::kFloat32) {
    launch<float, true>(input, count, scale, output, e5m2, amax, stream);
  } else {
    launch<__nv_bfloat16, true>(input, count, scale, output, e5m2, amax, stream);
  }
}

bool cast_transpose_fits(int64_t rows, int64_t columns) {
  return rows > 0 && columns > 0 && rows % 4 == 0 && columns % 4 == 0 && (rows + kTile - 1) / kTile <= 65535;
}

void launch_cast_transpose_to_fp8(const void* input, Element input_type, int64_t rows, int64_t columns,
                                  const float* scale, void* output, void* transposed, bool e5m2, float* amax,
                                  void* stream) {
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
  auto* bytes = static_cast<__nv_fp8_storage_t*>(output);
  auto* transposed_bytes = static_cast<__nv_fp8_storage_t*>(transposed);
  if (input_type == Element::kFloat32) {
    cast_transpose_kernel<<<tiles_of(rows, columns), kThreads, 0, cuda_stream>>>(
        PlainValues<float>{static_cast<const float*>(input), columns}, rows, columns, scale, bytes, transposed_bytes,
        e5m2, amax);
  } else {
    cast_transpose_kernel<<<tiles_of(rows, columns), kThreads, 0, cuda_stream>>>(
        PlainValues<__nv_bfloat16>{static_cast<const __nv_bfloat16*>(input), columns}, rows, columns, scale, bytes,
        transposed_bytes, e5m2, amax);
  }
  detail::check_launch("cast_transpose_kernel");
}

void launch_swiglu_cast_transpose_to_fp8(const void* input, int64_t rows, int64_t columns, const float* scale,
                                         void* output, void* transposed, bool e5m2, float* amax, void* stream) {
  cast_transpose_kernel<<<tiles_of(rows, columns), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      SwigluValues{static_cast<const __nv_bfloat16*>(input), columns}, rows, columns, scale,
      static_cast<__nv_fp8_storage_t*>(output), static_cast<__nv_fp8_storage_t*>(transposed), e5m2, amax);
  detail::check_launch("cast_transpose_kernel (SwiGLU)");
}

void launch_transpose_fp8(const void* input, int64_t rows, int64_t columns, void* transposed, void* stream) {
  transpose_kernel<<<tiles_of(rows, columns), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<const __nv_fp8_storage_t*>(input), rows, columns, static_cast<__nv_fp8_storage_t*>(transposed));
  detail::check_launch("transpose_kernel");
}

void launch_swiglu_amax(const void* input, int64_t rows, int64_t columns, float* amax, void* stream) {
  values_amax_kernel<<<blocks_for(rows * columns), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      SwigluValues{static_cast<const __nv_bfloat16*>(input), columns}, rows, columns, amax);
  detail::check_launch("values_amax_kernel (SwiGLU)");
}

void launch_cast_rows_to_fp8(const void* input, Element input_type, int64_t rows, int64_t columns, float largest,
                             void* output, float* scale_inverse, void* stream) {
  if (rows == 0) return;
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
  auto* bytes = static_cast<__nv_fp8_storage_t*>(output);
  const auto grid = static_cast<unsigned>(rows);
  if (input_type == Element::kFloat32) {
    cast_rows_kernel<float>
        <<<grid, kThreads, 0, cuda_stream>>>(static_cast<const float*>(input), columns, largest, bytes, scale_inverse);
  } else {
    cast_rows_kernel<__nv_bfloat16><<<grid, kThreads, 0, cuda_stream>>>(static_cast<const __nv_bfloat16*>(input),
                                                                        columns, largest, bytes, scale_inverse);
  }
  detail::check_launch("cast_rows_kernel");
}

}  // namespace graphed::kernels
