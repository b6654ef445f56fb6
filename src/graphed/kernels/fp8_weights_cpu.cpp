// kernels/fp8_weights_cpu.cpp — kernels/fp8_weights.h on a CPU build, in place of fp8_weights_cuda.cpp (one
// convention for the two builds: src/graphed/CMakeLists.txt): no weight fits (no FP8 tensor cores), and the
// command line refuses --quantization fp8 before a weight is quantized.
#include "graphed/kernels/fp8_weights.h"

#include "graphed/util/error.h"

namespace graphed::kernels {

bool fp8_weight_fits(const at::Tensor&) { return false; }

Fp8Weight quantize_weight_fp8(const at::Tensor&) {
  GRAPHED_INTERNAL_ASSERT(false, "FP8 weights need a CUDA build (the command line checks fp8_supported first)");
  return {};
}

at::Tensor fp8_weight_linear(const at::Tensor&, const Fp8Weight&, const at::Tensor&, const LinearInput&,
                             const at::Tensor&) {
  GRAPHED_INTERNAL_ASSERT(false, "FP8 weights need a CUDA build (the command line checks fp8_supported first)");
  return {};
}

}  // namespace graphed::kernels
