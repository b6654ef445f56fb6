// util/compat.h — every difference between the two LibTorch flavours graphed builds against lives
// here: Debian's libtorch-dev 1.13 (CPU, CI) and the pip wheel's LibTorch 2.x (CUDA, GPU machines).
// Code elsewhere never tests TORCH_VERSION_* itself. Later waves add SDPA, fused AdamW and autocast.
#pragma once

#include <torch/version.h>

/// True when the LibTorch being compiled against is at least major.minor.
#define GRAPHED_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

#ifndef GRAPHED_CUDA
#define GRAPHED_CUDA 0
#endif

namespace graphed::compat {

/// Whether this LibTorch has the public at::scaled_dot_product_attention (2.0+); 1.13 has only
/// the private at::_scaled_dot_product_attention.
inline constexpr bool kHasPublicSdpa = GRAPHED_TORCH_AT_LEAST(2, 0);

/// Whether extra CUDA generators can be registered with a graph (2.x); 1.13 only the default one.
inline constexpr bool kHasGraphGeneratorRegistration = GRAPHED_TORCH_AT_LEAST(2, 1);

/// Whether CUDAGraph::capture_begin takes a cudaStreamCaptureMode (2.x); 1.13 is Global only.
inline constexpr bool kHasCaptureModeArgument = GRAPHED_TORCH_AT_LEAST(2, 0);

}  // namespace graphed::compat
