// kernels/grouped_gemm.cu — see kernels/grouped_gemm.h. A block computes one 64 x 64 tile of one expert's
// product: its operands pass through shared memory 64 deep (32 for fp32) at a time, each thread fetching the next
// pass's share into registers while the block multiplies the current one; loads run along the global array's
// contiguous dimension (16 bytes at a time where aligned, so a warp's loads coalesce) and are stored in the layout
// that dimension gives, row- or column-major; four warps each multiply a 32 x 32 quarter, with tensor cores (WMMA
// 16 x 16 x 16) for bf16 and fp16 and fused multiply-adds for fp32, accumulating in fp32 in depth order.
#include "graphed/kernels/grouped_gemm.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "graphed/kernels/detail/launch_check.h"

namespace graphed::kernels {
namespace {

constexpr int kTile = 64;      // output rows and columns of a block
constexpr int kThreads = 128;  // four warps, each a 32 x 32 quarter of the tile

/// Reduced elements per pass through shared memory: 64 for 16-bit types, 32 for fp32 (the same bytes).
template <typename T>
constexpr int kDepth = std::is_same_v<T, float> ? 32 : 64;

/// Elements in one 16-byte load.
template <typename T>
constexpr int kVector = 16 / static_cast<int>(sizeof(T));

template <typename T>
__device__ __forceinline__ float as_float(T value) {
  if constexpr (std::is_same_v<T, float>) {
    return value;
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __bfloat162float(value);
  } else {
    return __half2float(value);
  }
}

template <typename T>
__device__ __forceinline__ T from_float(float value) {
  if constexpr (std::is_same_v<T, float>) {
    return value;
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16_rn(value);
  } else {
    return __float2half_rn(value);
  }
}

/// The shared-memory tiles of one pass: A (kTile x kDepth) and B (kDepth x kTile), each row- or column-major as its
/// global array's contiguous dimension makes it. `lead` is the stride between the stored rows (padded by 8 so that
/// WMMA's loads stay aligned and warps spread over the banks).
template <bool kColumnMajor, int kRows, int kColumns>
struct TileLayout {
  static constexpr bool column_major = kColumnMajor;
  static constexpr int outer = kColumnMajor ? kColumns : kRows;  // stored rows
  static constexpr int inner = kColumnMajor ? kRows : kColumns;  // elements in each, contiguous in global memory
  static constexpr int lead = inner + 8;
  static constexpr int size = outer * lead;
  /// The stored position of element (row, column).
  __device__ static int at(int row, int column) { return kColumnMajor ? column * lead + row : row * lead + column; }
};

/// One thread's share of a tile on its way from global memory to shared memory, 16 bytes a part: stored row
/// `outer` holds the `inner` elements at base + outer x stride, zero past valid_outer rows or valid_inner elements.
/// fetch() issues the loads (with `vectors`, stride and base 16-byte aligned as the launcher checks, one load a part
/// but at a ragged end) and store() writes them, so that a pass's loads are in flight while the pass before
/// multiplies.
template <typename Layout, typename T>
struct TileFetch {
  static constexpr int width = kVector<T>;
  static constexpr int per_row = Layout::inner / width;
  static constexpr int count = Layout::outer * per_row / kThreads;
  static_assert(Layout::inner % width == 0 && Layout::lead % width == 0, "a stored row holds whole vectors");
  static_assert(Layout::outer * per_row % kThreads == 0, "every thread moves the same number of parts");

  uint4 parts[count];

  __device__ __forceinline__ void fetch(const T* base, int64_t stride, int64_t valid_outer, int64_t valid_inner,
                                        bool vectors) {
    for (int part = 0; part < count; ++part) {
      const int index = threadIdx.x + part * kThreads;
      const int outer = index / per_row;
      const int inner = (index % per_row) * width;
      const T* source = base + outer * stride + inner;
      if (vectors && outer < valid_outer && inner + width <= valid_inner) {
        parts[part] = *reinterpret_cast<const uint4*>(source);
        continue;
      }
      T* elements = reinterpret_cast<T*>(&parts[part]);
      for (int element = 0; element < width; ++element) {
        elements[element] =
            outer < valid_outer && inner + element < valid_inner ? source[element] : from_float<T>(0.0f);
      }
    }
  }

  __device__ __forceinline__ void store(T* tile) const {
    for (int part = 0; part < count; ++part) {
      const int index = threadIdx.x + part * kThreads;
      *reinterpret_cast<uint4*>(tile + (index / per_row) * Layout::lead + (index % per_row) * width) = parts[part];
    }
  }
};

/// The accumulators of a block: with WMMA, 2 x 2 fragments per warp; with fp32, 8 x 4 values per thread (rows
/// thread / 16 + 8 m, columns thread % 16 + 16 n).
template <typename T, typename LayoutA, typename LayoutB>
struct TileProduct {
  static constexpr bool tensor_cores = !std::is_same_v<T, float>;
  using FragmentA = nvcuda::wmma::fragment<
      nvcuda::wmma::matrix_a, 16, 16, 16, T,
      std::conditional_t<LayoutA::column_major, nvcuda::wmma::col_major, nvcuda::wmma::row_major>>;
  using FragmentB = nvcuda::wmma::fragment<
      nvcuda::wmma::matrix_b, 16, 16, 16, T,
      std::conditional_t<LayoutB::column_major, nvcuda::wmma::col_major, nvcuda::wmma::row_major>>;
  using Accumulator = nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float>;

  Accumulator fragments[2][2];
  float values[8][4];

  __device__ void clear() {
    if constexpr (tensor_cores) {
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) nvcuda::wmma::fill_fragment(fragments[i][j], 0.0f);
    } else {
      for (int m = 0; m < 8; ++m)
        for (int n = 0; n < 4; ++n) values[m][n] = 0.0f;
    }
  }

  /// Adds the product of the tiles in shared memory, over their depth.
  __device__ void add(const T* a, const T* b) {
    if constexpr (tensor_cores) {
      const int warp = threadIdx.x / 32;
      const int row = (warp / 2) * 32;
      const int column = (warp % 2) * 32;
      for (int step = 0; step < kDepth<T>; step += 16) {
        FragmentA fragment_a[2];
        FragmentB fragment_b[2];
        for (int i = 0; i < 2; ++i)
          nvcuda::wmma::load_matrix_sync(fragment_a[i], a + LayoutA::at(row + 16 * i, step), LayoutA::lead);
        for (int j = 0; j < 2; ++j)
          nvcuda::wmma::load_matrix_sync(fragment_b[j], b + LayoutB::at(step, column + 16 * j), LayoutB::lead);
        for (int i = 0; i < 2; ++i)
          for (int j = 0; j < 2; ++j)
            nvcuda::wmma::mma_sync(fragments[i][j], fragment_a[i], fragment_b[j], fragments[i][j]);
      }
    } else {
      const int row = threadIdx.x / 16;
      const int column = threadIdx.x % 16;
      for (int step = 0; step < kDepth<T>; ++step) {
        float from_a[8], from_b[4];
        for (int m = 0; m < 8; ++m) from_a[m] = as_float(a[LayoutA::at(row + 8 * m, step)]);
        for (int n = 0; n < 4; ++n) from_b[n] = as_float(b[LayoutB::at(step, column + 16 * n)]);
        for (int m = 0; m < 8; ++m)
          for (int n = 0; n < 4; ++n) values[m][n] = fmaf(from_a[m], from_b[n], values[m][n]);
      }
    }
  }

  /// Calls store(row, column, value) for every element of the tile; `staging` holds kTile x (kTile + 4) floats.
  template <typename Store>
  __device__ void write(float* staging, Store store) {
    if constexpr (tensor_cores) {
      const int warp = threadIdx.x / 32;
      constexpr int lead = kTile + 4;
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j)
          nvcuda::wmma::store_matrix_sync(staging + ((warp / 2) * 32 + 16 * i) * lead + (warp % 2) * 32 + 16 * j,
                                          fragments[i][j], lead, nvcuda::wmma::mem_row_major);
      __syncthreads();
      for (int index = threadIdx.x; index < kTile * kTile; index += kThreads) {
        store(index / kTile, index % kTile, staging[(index / kTile) * lead + index % kTile]);
      }
    } else {
      for (int m = 0; m < 8; ++m)
        for (int n = 0; n < 4; ++n) store(threadIdx.x / 16 + 8 * m, threadIdx.x % 16 + 16 * n, values[m][n]);
    }
  }
};

template <typename T, typename LayoutA, typename LayoutB>
struct SharedTiles {
  alignas(32) T a[LayoutA::size];
  alignas(32) T b[LayoutB::size];
  alignas(32) float staging[std::is_same_v<T, float> ? 1 : kTile * (kTile + 4)];  // WMMA's way out
};

/// Finds the tile `slot` of the row products: the expert whose rows hold it and the tile's first row; false past
/// the last tile (the grid has a slot for every tile of any routing).
__device__ bool find_row_tile(const int64_t* offsets, int64_t experts, int64_t slot, int64_t& expert, int64_t& first,
                              int64_t& end) {
  for (int64_t e = 0; e < experts; ++e) {
    const int64_t begin = offsets[e];
    const int64_t finish = offsets[e + 1];
    const int64_t tiles = (finish - begin + kTile - 1) / kTile;
    if (slot < tiles) {
      expert = e;
      first = begin + slot * kTile;
      end = finish;
      return true;
    }
    slot -= tiles;
  }
  return false;
}

template <typename T, bool kTransposeB>
__global__ void __launch_bounds__(kThreads)
    grouped_rows_kernel(const T* __restrict__ a, const T* __restrict__ b, const int64_t* __restrict__ offsets,
                        T* __restrict__ out, GroupedGemmShape shape, bool vectors) {
  using LayoutA = TileLayout<false, kTile, kDepth<T>>;
  using LayoutB = TileLayout<kTransposeB, kDepth<T>, kTile>;
  __shared__ SharedTiles<T, LayoutA, LayoutB> tiles;
  int64_t expert = 0, first = 0, end = 0;
  if (!find_row_tile(offsets, shape.experts, blockIdx.x, expert, first, end)) return;
  const int64_t depth = shape.depth;
  const int64_t columns = shape.columns;
  const int64_t column0 = int64_t{blockIdx.y} * kTile;
  const T* matrix = b + expert * depth * columns;
  TileFetch<LayoutA, T> next_a;
  TileFetch<LayoutB, T> next_b;
  const auto fetch = [&](int64_t depth0) {
    next_a.fetch(a + first * depth + depth0, depth, end - first, depth - depth0, vectors);
    if constexpr (kTransposeB) {  // b [E, N, K]: stored rows are columns, k contiguous
      next_b.fetch(matrix + column0 * depth + depth0, depth, columns - column0, depth - depth0, vectors);
    } else {  // b [E, K, N]: stored rows are k, columns contiguous
      next_b.fetch(matrix + depth0 * columns + column0, columns, depth - depth0, columns - column0, vectors);
    }
  };
  TileProduct<T, LayoutA, LayoutB> product;
  product.clear();
  fetch(0);
  for (int64_t depth0 = 0; depth0 < depth; depth0 += kDepth<T>) {
    __syncthreads();
    next_a.store(tiles.a);
    next_b.store(tiles.b);
    __syncthreads();
    if (depth0 + kDepth<T> < depth) fetch(depth0 + kDepth<T>);
    product.add(tiles.a, tiles.b);
  }
  product.write(tiles.staging, [&](int row, int column, float value) {
    if (first + row < end && column0 + column < columns) {
      out[(first + row) * columns + column0 + column] = from_float<T>(value);
    }
  });
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    grouped_weights_kernel(const T* __restrict__ a, const T* __restrict__ g, const int64_t* __restrict__ offsets,
                           T* __restrict__ out, GroupedGemmShape shape, bool vectors) {
  using LayoutA = TileLayout<true, kTile, kDepth<T>>;  // A_op(i, r) = a[row r, i]: stored rows are r, i contiguous
  using LayoutB = TileLayout<false, kDepth<T>, kTile>;
  __shared__ SharedTiles<T, LayoutA, LayoutB> tiles;
  const int64_t expert = blockIdx.z;
  const int64_t begin = offsets[expert];
  const int64_t end = offsets[expert + 1];
  const int64_t depth = shape.depth;  // K: the output's rows
  const int64_t columns = shape.columns;
  const int64_t row0 = int64_t{blockIdx.y} * kTile;
  const int64_t column0 = int64_t{blockIdx.x} * kTile;
  TileFetch<LayoutA, T> next_a;
  TileFetch<LayoutB, T> next_b;
  const auto fetch = [&](int64_t first) {
    next_a.fetch(a + first * depth + row0, depth, end - first, depth - row0, vectors);
    next_b.fetch(g + first * columns + column0, columns, end - first, columns - column0, vectors);
  };
  TileProduct<T, LayoutA, LayoutB> product;
  product.clear();
  if (begin < end) fetch(begin);
  for (int64_t first = begin; first < end; first += kDepth<T>) {
    __syncthreads();
    next_a.store(tiles.a);
    next_b.store(tiles.b);
    __syncthreads();
    if (first + kDepth<T> < end) fetch(first + kDepth<T>);
    product.add(tiles.a, tiles.b);
  }
  T* matrix = out + expert * depth * columns;
  product.write(tiles.staging, [&](int row, int column, float value) {
    if (row0 + row < depth && column0 + column < columns) {
      matrix[(row0 + row) * columns + column0 + column] = from_float<T>(value);
    }
  });
}

/// Whether every operand's rows can move 16 bytes at a time: aligned bases, and strides of whole vectors.
template <typename T>
bool vectorizable(std::initializer_list<const void*> bases, std::initializer_list<int64_t> strides) {
  for (const void* base : bases) {
    if (reinterpret_cast<uintptr_t>(base) % 16 != 0) return false;
  }
  for (int64_t stride : strides) {
    if (stride % kVector<T> != 0) return false;
  }
  return true;
}

template <typename T>
void launch_rows(const void* a, const void* b, const int64_t* offsets, void* out, const GroupedGemmShape& shape,
                 bool transpose_b, cudaStream_t stream) {
  // x: a slot for every row tile of any routing (up to 2^31 - 1), y: the column tiles; consecutive blocks share
  // their expert's column tile of b.
  const dim3 grid(static_cast<unsigned>((shape.rows + kTile - 1) / kTile + shape.experts),
                  static_cast<unsigned>((shape.columns + kTile - 1) / kTile));
  const bool vectors = vectorizable<T>({a, b}, {shape.depth, shape.columns});
  if (transpose_b) {
    grouped_rows_kernel<T, true><<<grid, kThreads, 0, stream>>>(static_cast<const T*>(a), static_cast<const T*>(b),
                                                                offsets, static_cast<T*>(out), shape, vectors);
  } else {
    grouped_rows_kernel<T, false><<<grid, kThreads, 0, stream>>>(static_cast<const T*>(a), static_cast<const T*>(b),
                                                                 offsets, static_cast<T*>(out), shape, vectors);
  }
  detail::check_launch("grouped_rows_kernel");
}

template <typename T>
void launch_weights(const void* a, const void* g, const int64_t* offsets, void* out, const GroupedGemmShape& shape,
                    cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((shape.columns + kTile - 1) / kTile),
                  static_cast<unsigned>((shape.depth + kTile - 1) / kTile), static_cast<unsigned>(shape.experts));
  const bool vectors = vectorizable<T>({a, g}, {shape.depth, shape.columns});
  grouped_weights_kernel<T><<<grid, kThreads, 0, stream>>>(static_cast<const T*>(a), static_cast<const T*>(g), offsets,
                                                           static_cast<T*>(out), shape, vectors);
  detail::check_launch("grouped_weights_kernel");
}

}  // namespace

void launch_grouped_rows_gemm(const void* a, const void* b, const int64_t* offsets, void* out,
                              const GroupedGemmShape& shape, bool transpose_b, void* stream) {
  if (shape.rows == 0 || shape.columns == 0 || shape.experts == 0) return;
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
  switch (shape.type) {
    case GemmType::kFloat32: return launch_rows<float>(a, b, offsets, out, shape, transpose_b, cuda_stream);
    case GemmType::kBFloat16: return launch_rows<__nv_bfloat16>(a, b, offsets, out, shape, transpose_b, cuda_stream);
    case GemmType::kFloat16: return launch_rows<__half>(a, b, offsets, out, shape, transpose_b, cuda_stream);
  }
}

void launch_grouped_weights_gemm(const void* a, const void* g, const int64_t* offsets, void* out,
                                 const GroupedGemmShape& shape, void* stream) {
  if (shape.depth == 0 || shape.columns == 0 || shape.experts == 0) return;
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
  switch (shape.type) {
    case GemmType::kFloat32: return launch_weights<float>(a, g, offsets, out, shape, cuda_stream);
    case GemmType::kBFloat16: return launch_weights<__nv_bfloat16>(a, g, offsets, out, shape, cuda_stream);
    case GemmType::kFloat16: return launch_weights<__half>(a, g, offsets, out, shape, cuda_stream);
  }
}

}  // namespace graphed::kernels
