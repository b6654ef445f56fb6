// kernels/sampling_ops_cpu.cpp — kernels/sampling_ops.h's launch on a CPU build, which has no CUDA tensors to
// pass it: never reached.
#include "graphed/kernels/sampling_ops.h"

#include "graphed/util/error.h"

namespace graphed::kernels::device {

void gumbel_max_into(const at::Tensor&, const GumbelRows&, at::Tensor&, float) {
  GRAPHED_INTERNAL_ASSERT(false, "gumbel_max_into got a CUDA tensor in a build without CUDA");
}

}  // namespace graphed::kernels::device
