// kernels/sampling_ops_cpu.cpp — kernels/sampling_ops.h's launch (namespace device) on a CPU build, in place of
// sampling_ops_cuda.cpp (one convention for the two builds: src/graphed/CMakeLists.txt). A CPU build has no CUDA
// tensors to pass it: never reached.
#include "graphed/kernels/sampling_ops.h"

#include "graphed/util/error.h"

namespace graphed::kernels::device {

void gumbel_max_into(const at::Tensor&, const GumbelRows&, at::Tensor&, float) {
  GRAPHED_INTERNAL_ASSERT(false, "gumbel_max_into got a CUDA tensor in a build without CUDA");
}

void top_logprobs_into(const at::Tensor&, at::Tensor&, at::Tensor&) {
  GRAPHED_INTERNAL_ASSERT(false, "top_logprobs_into got a CUDA tensor in a build without CUDA");
}

}  // namespace graphed::kernels::device
