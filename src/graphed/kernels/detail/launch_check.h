// kernels/detail/launch_check.h — the one check of every kernel launch in kernels/: the .cu files' launch_*
// functions check each launch here (their callers need not) and throw graphed::Error naming the kernel and CUDA's
// error. Host code free of ATen, since nvcc compiles the .cu files without LibTorch.
#pragma once

#include <cuda_runtime.h>

#include "graphed/util/error.h"

namespace graphed::kernels::detail {

/// Throws graphed::Error naming `kernel` unless `status`, what a launch call returned (cudaLaunchKernelEx, a
/// cudaMemsetAsync or cudaFuncSetAttribute a launch depends on), is cudaSuccess. The runtime's last error is
/// cleared first, so that the next launch's check does not report this failure again. Inside a stream capture
/// the check is legal and a refused launch throws at once; the message carries CUDA's error name and text, which
/// capture/capture_diagnostics.h reads to diagnose the failed capture.
inline void check_launch(cudaError_t status, const char* kernel) {
  if (status == cudaSuccess) return;
  cudaGetLastError();
  throw ::graphed::Error(::graphed::detail::concat(
      "CUDA failed at the launch of kernel ", kernel, ": ", cudaGetErrorName(status), " (", cudaGetErrorString(status),
      "); fix: where the error names the kernel image or device function, rebuild graphed for this GPU "
      "(TORCH_CUDA_ARCH_LIST); otherwise an earlier kernel may have failed: rerun with CUDA_LAUNCH_BLOCKING=1 to "
      "find it, and report the error"));
}

/// After a <<<...>>> launch, which returns nothing: the runtime's last error (read and cleared), checked as
/// above. An error that an earlier kernel left behind (an illegal address) surfaces here too, under this name.
inline void check_launch(const char* kernel) { check_launch(cudaGetLastError(), kernel); }

}  // namespace graphed::kernels::detail
