// kernels/detail/programmatic_launch.cuh — programmatic dependent launch (Hopper and later) for the kernels of a
// decode step (decode_kernels.cu's RoPE, paged_attention.cu, row_linear.cu, peer_all_reduce.cu): a kernel launched
// this way may start while the one before it on the stream is still running, runs the part of its work that reads
// no earlier output (loading weights), then waits for that kernel to finish. CUDA graphs keep the launch
// attribute, so a decode step's graph has no launch gap between them.
#pragma once

#include <cuda_runtime.h>

#include "graphed/kernels/detail/device_facts.h"
#include "graphed/kernels/detail/launch_check.h"

namespace graphed::kernels::detail {

/// Blocks until the kernel before this one on the stream has finished and its writes are visible. Every
/// kernel launched through launch_programmatic calls it before it writes anything, and before it reads
/// anything but what no kernel of the step writes (a layer's weights: the kernel just before may still be
/// running). A no-op for kernels launched plainly, and before Hopper.
__device__ __forceinline__ void wait_for_previous_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/// Lets the next kernel on the stream start (its own wait still holds it until this one finishes).
__device__ __forceinline__ void let_next_kernel_start() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/// Launches `kernel` (named `name` in a failure's message) with the programmatic stream serialization attribute
/// where the device takes it, plainly elsewhere; checks what cudaLaunchKernelEx returned (detail/launch_check.h).
template <typename... Parameters, typename... Arguments>
void launch_programmatic(const char* name, void (*kernel)(Parameters...), dim3 grid, dim3 block, size_t shared_bytes,
                         cudaStream_t stream, Arguments... arguments) {
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attribute;
  config.numAttrs = programmatic_launch_supported() ? 1 : 0;
  check_launch(cudaLaunchKernelEx(&config, kernel, static_cast<Parameters>(arguments)...), name);
}

}  // namespace graphed::kernels::detail
