// kernels/peer_all_reduce.cu — kernels/peer_all_reduce.h: the one-shot all-reduce (vLLM's custom
// all-reduce and TensorRT-LLM's one-shot reduce follow the same protocol) and the areas it works in. It is a
// programmatic dependent launch (kernels/detail/programmatic_launch.cuh), like the decode kernels around it.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "graphed/kernels/detail/programmatic_launch.cuh"
#include "graphed/kernels/peer_all_reduce.h"

namespace graphed::kernels {
namespace {

constexpr int kThreads = 512;
constexpr size_t kFlagBytes = sizeof(uint32_t) * kPeerMaxBlocks * kPeerMaxRanks;
constexpr size_t kCounterBytes = sizeof(uint32_t) * kPeerMaxBlocks;
constexpr size_t kHeaderBytes = 4096;  // flags and counters, padded so the receive slots stay aligned
static_assert(kFlagBytes + kCounterBytes <= kHeaderBytes, "flags and counters fit the header");

__device__ __forceinline__ uint32_t* flags_of(void* area) { return static_cast<uint32_t*>(area); }
__device__ __forceinline__ uint32_t* counters_of(void* area) {
  return reinterpret_cast<uint32_t*>(static_cast<char*>(area) + kFlagBytes);
}
/// Where rank `from`'s data lands in an area, in slot `slot`.
__device__ __forceinline__ uint4* receive_of(void* area, int slot, int from, int ranks, int64_t capacity) {
  return reinterpret_cast<uint4*>(static_cast<char*>(area) + kHeaderBytes + (slot * ranks + from) * capacity);
}

__device__ __forceinline__ void store_release_system(uint32_t* flag, uint32_t value) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(flag), "r"(value) : "memory");
}
__device__ __forceinline__ uint32_t load_acquire_system(const uint32_t* flag) {
  uint32_t value;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(value) : "l"(flag) : "memory");
  return value;
}

/// Sixteen bytes of Element added into accumulators in fp32.
template <typename Element>
struct Vector;
template <>
struct Vector<__nv_bfloat16> {
  static constexpr int kCount = 8;
  __device__ static void add(const uint4& packed, float* sums) {
    const __nv_bfloat162* pairs = reinterpret_cast<const __nv_bfloat162*>(&packed);
#pragma unroll
    for (int p = 0; p < 4; ++p) {
      const float2 pair = __bfloat1622float2(pairs[p]);
      sums[2 * p] += pair.x;
      sums[2 * p + 1] += pair.y;
    }
  }
  __device__ static uint4 pack(const float* sums) {
    uint4 packed;
    __nv_bfloat162* pairs = reinterpret_cast<__nv_bfloat162*>(&packed);
#pragma unroll
    for (int p = 0; p < 4; ++p) pairs[p] = __floats2bfloat162_rn(sums[2 * p], sums[2 * p + 1]);
    return packed;
  }
};
template <>
struct Vector<float> {
  static constexpr int kCount = 4;
  __device__ static void add(const uint4& packed, float* sums) {
    sums[0] += __uint_as_float(packed.x), sums[1] += __uint_as_float(packed.y);
    sums[2] += __uint_as_float(packed.z), sums[3] += __uint_as_float(packed.w);
  }
  __device__ static uint4 pack(const float* sums) {
    return make_uint4(__float_as_uint(sums[0]), __float_as_uint(sums[1]), __float_as_uint(sums[2]),
                      __float_as_uint(sums[3]));
  }
};

/// Block b of every rank handles the same vectors; it waits only for block b of each peer. The block's
/// counter (the same on every rank, as every rank makes the same calls) names the call; its parity picks the
/// receive slot. A peer's flag may already show the next call (it raises it before it waits), hence ">=".
template <typename Element, int kRanks>
__global__ void __launch_bounds__(kThreads)
    peer_all_reduce_kernel(PeerAreas areas, const uint4* input, uint4* output, int64_t vectors) {
  __shared__ uint32_t call;
  const int block = blockIdx.x;
  const int rank = areas.rank;
  void* own = areas.areas[rank];
  // Launched programmatically: the kernel before (which wrote `input`) may still be running. Once every block
  // is here, the next kernel may start and load its weights while this one waits on the peers.
  detail::wait_for_previous_kernel();
  detail::let_next_kernel_start();
  if (threadIdx.x == 0) {
    call = counters_of(own)[block] + 1;
    counters_of(own)[block] = call;
  }
  __syncthreads();
  const int slot = call & 1;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t i = static_cast<int64_t>(block) * kThreads + threadIdx.x; i < vectors; i += stride) {
    const uint4 value = input[i];
#pragma unroll
    for (int step = 1; step < kRanks; ++step) {
      const int peer = (rank + step) % kRanks;
      receive_of(areas.areas[peer], slot, rank, kRanks, areas.capacity)[i] = value;
    }
  }
  __threadfence_system();  // this thread's writes reach the peers before its block raises their flags
  __syncthreads();
  const int peer = threadIdx.x;
  if (peer < kRanks && peer != rank) {
    store_release_system(flags_of(areas.areas[peer]) + block * kPeerMaxRanks + rank, call);
    const uint32_t* flag = flags_of(own) + block * kPeerMaxRanks + peer;
    while (static_cast<int32_t>(load_acquire_system(flag) - call) < 0) {
    }
  }
  __syncthreads();
  for (int64_t i = static_cast<int64_t>(block) * kThreads + threadIdx.x; i < vectors; i += stride) {
    float sums[Vector<Element>::kCount] = {};
#pragma unroll
    for (int from = 0; from < kRanks; ++from) {
      const uint4 value = from == rank ? input[i] : __ldcg(receive_of(own, slot, from, kRanks, areas.capacity) + i);
      Vector<Element>::add(value, sums);
    }
    output[i] = Vector<Element>::pack(sums);
  }
}

template <typename Element>
cudaError_t launch_for(const PeerAreas& areas, const void* input, void* output, int64_t vectors, cudaStream_t stream) {
  int64_t blocks = (vectors + kThreads - 1) / kThreads;
  if (blocks > kPeerMaxBlocks) blocks = kPeerMaxBlocks;
  if (blocks < 1) blocks = 1;
  const auto* in = static_cast<const uint4*>(input);
  auto* out = static_cast<uint4*>(output);
  const dim3 grid(static_cast<unsigned>(blocks));
  switch (areas.ranks) {
    case 2:
      detail::launch_programmatic("peer_all_reduce_kernel", peer_all_reduce_kernel<Element, 2>, grid, kThreads, 0,
                                  stream, areas, in, out, vectors);
      break;
    case 4:
      detail::launch_programmatic("peer_all_reduce_kernel", peer_all_reduce_kernel<Element, 4>, grid, kThreads, 0,
                                  stream, areas, in, out, vectors);
      break;
    case 8:
      detail::launch_programmatic("peer_all_reduce_kernel", peer_all_reduce_kernel<Element, 8>, grid, kThreads, 0,
                                  stream, areas, in, out, vectors);
      break;
    default: return cudaErrorInvalidValue;
  }
  return cudaSuccess;  // a launch that failed has thrown (detail/launch_check.h)
}

}  // namespace

size_t peer_area_bytes(int ranks, int64_t capacity) {
  return kHeaderBytes + 2 * static_cast<size_t>(ranks) * static_cast<size_t>(capacity);
}

int launch_peer_all_reduce(const PeerAreas& areas, const void* input, void* output, int64_t elements,
                           PeerElement element, void* stream) {
  const int64_t bytes = elements * (element == PeerElement::kBFloat16 ? 2 : 4);
  if (bytes % 16 != 0 || bytes > areas.capacity) return cudaErrorInvalidValue;
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
  if (element == PeerElement::kBFloat16)
    return launch_for<__nv_bfloat16>(areas, input, output, bytes / 16, cuda_stream);
  return launch_for<float>(areas, input, output, bytes / 16, cuda_stream);
}

int allocate_peer_area(size_t bytes, void** area, void* handle) {
  cudaError_t status = cudaMalloc(area, bytes);
  if (status != cudaSuccess) return status;
  status = cudaMemset(*area, 0, bytes);
  if (status == cudaSuccess) status = cudaDeviceSynchronize();
  if (status == cudaSuccess) status = cudaIpcGetMemHandle(static_cast<cudaIpcMemHandle_t*>(handle), *area);
  if (status != cudaSuccess) cudaFree(*area), *area = nullptr;
  return status;
}

int open_peer_area(const void* handle, void** area) {
  cudaIpcMemHandle_t ipc_handle;
  static_assert(sizeof(ipc_handle) == kPeerHandleBytes, "a cudaIpcMemHandle_t is 64 bytes");
  memcpy(&ipc_handle, handle, sizeof(ipc_handle));
  const cudaError_t status = cudaIpcOpenMemHandle(area, ipc_handle, cudaIpcMemLazyEnablePeerAccess);
  if (status != cudaSuccess) {
    *area = nullptr;
    cudaGetLastError();  // clear it: a peer that cannot be mapped is a fallback, not a failed stream
  }
  return status;
}

void close_peer_area(void* area) { cudaIpcCloseMemHandle(area); }
void free_peer_area(void* area) { cudaFree(area); }
const char* peer_error_text(int code) { return cudaGetErrorString(static_cast<cudaError_t>(code)); }

}  // namespace graphed::kernels
